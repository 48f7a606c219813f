"""The command line: subcommands, --help, and one-line errors for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, mcu_in_process, run_mcu
from repo import EXAMPLES, requires_qemu


@pytest.mark.parametrize("sub", ["", "boards", "build", "run", "export", "eval", "ops"])
def test_help(sub: str) -> None:
    proc = mcu_in_process(*([sub] if sub else []), "--help")
    assert proc.returncode == 0
    assert "usage: mcu" in proc.stdout


def test_the_command_line_starts_without_torch_or_jinja2() -> None:
    """`mcu --help`, `mcu boards` and a refusal answer in a fraction of a second: torch (seconds to import) and
    jinja2 load only when a command compiles or renders (docs/ARCHITECTURE.md)."""
    import subprocess
    import sys

    probe = "import sys, mcu.commands.cli; print(sorted(m for m in ('torch', 'jinja2') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_console_script_runs_main() -> None:
    """The installed `mcu` script, as a real process: the other tests call main() in this process."""
    import shutil
    import subprocess
    import sys

    script = shutil.which("mcu", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip(f"no `mcu` console script beside {sys.executable} (mcu not pip-installed here)")
    proc = subprocess.run([script, "boards"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "mps2-an505" in proc.stdout and proc.stderr == ""


def test_boards_lists_the_simulated_boards() -> None:
    proc = mcu_in_process("boards", "--json")
    assert proc.returncode == 0
    boards = {b["name"]: b for b in json.loads(proc.stdout)["boards"]}
    for name, core in [("mps2-an505", "cortex-m33"), ("mps2-an386", "cortex-m4"), ("mps2-an385", "cortex-m3")]:
        assert boards[name]["core"] == core
        assert boards[name]["simulator"] == "qemu"
    text = mcu_in_process("boards").stdout
    assert "mps2-an505" in text and "cortex-m33" in text


def test_model_file_without_model(tmp_path: Path) -> None:
    f = tmp_path / "empty.py"
    f.write_text("import torch\nexample_inputs = (torch.randn(1, 4),)\n")
    assert_one_line_error(mcu_in_process("build", "--board", "mps2-an505", str(f)), "empty.py", "model", "get_model")


def test_model_file_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(mcu_in_process("build", "--board", "mps2-an505", str(tmp_path / "nope.py")), "does not exist")


def test_model_file_that_raises(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("import torch\n\nraise ValueError('boom')\n")
    assert_one_line_error(mcu_in_process("build", "--board", "mps2-an505", str(f)), "broken.py", "line 3", "boom")


def test_unsupported_op_names_op_and_source_line(tmp_path: Path) -> None:
    f = tmp_path / "fft_model.py"
    f.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.fft.fft(x).abs()\n"
        "model = M()\n"
        "example_inputs = (torch.randn(1, 16),)\n"
    )
    proc = mcu_in_process("build", "--board", "mps2-an505", str(f))
    assert_one_line_error(proc, "fft", "fft_model.py:4", "torch.fft.fft(x)")


def test_unknown_board() -> None:
    proc = mcu_in_process("build", "--board", "no-such-board", str(EXAMPLES / "small_cnn.py"))
    assert_one_line_error(proc, "no-such-board", "mps2-an505")


def test_model_too_large_for_the_board(tmp_path: Path) -> None:
    f = tmp_path / "wide.py"
    f.write_text(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU())\n"
        "example_inputs = (torch.randn(1, 3, 256, 256),)\n"
    )
    proc = mcu_in_process("build", "--board", "mps2-an505", str(f))
    assert_one_line_error(proc, "does not fit", "mps2-an505", "B too many")


def test_missing_cross_compiler(tmp_path: Path) -> None:
    proc = mcu_in_process("build", "--board", "mps2-an505", "-o", str(tmp_path / "out"),
                          str(EXAMPLES / "fc_autoencoder.py"), env={"MCU_ARM_GCC": str(tmp_path / "no-gcc")})
    assert_one_line_error(proc, "arm-none-eabi-gcc", "apt-get install")


def test_int8_without_calibration_says_what_to_add(tmp_path: Path) -> None:
    f = tmp_path / "nocal.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n")
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", str(f))
    assert_one_line_error(proc, "nocal.py", "calibration", "add `calibration =")


def test_calibration_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    f = tmp_path / "badcal.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n"
                 "calibration = [(torch.randn(1, 4),), (torch.randn(1, 5),)]\n")
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", str(f))
    assert_one_line_error(proc, "badcal.py", "calibration[1]", "[1, 5]", "[1, 4]")


@requires_qemu
def test_build_json_reports_sizes(tmp_path: Path) -> None:
    proc = mcu_in_process("build", "--board", "mps2-an505", "--json", "--quantize", "none", "-o", str(tmp_path / "out"),
                          str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["board"] == "mps2-an505" and report["quantize"] == "none"
    assert 0 < report["arena_lower_bound_bytes"] <= report["arena_bytes"] <= report["arena_live_set_bytes"]
    assert report["flash_bytes"] > 20 * 1024  # the weights alone are ~23 KB
    assert report["ram_bytes"] >= report["arena_bytes"]
    assert (tmp_path / "out" / "firmware.elf").is_file()


def test_auto_quantize_picks_int8_when_calibration_is_given(tmp_path: Path) -> None:
    f = tmp_path / "cal.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n"
                 "calibration = [(torch.randn(1, 4),) for _ in range(4)]\n")
    proc = mcu_in_process("export", "--board", "mps2-an505", str(f), "-o", str(tmp_path / "lib"))
    assert proc.returncode == 0, proc.stderr
    assert "int8_t" in (tmp_path / "lib" / "cal_model.h").read_text()


LEAKY_MODEL = """import logging, os, signal, sys, warnings
import torch
import helper

os.write(1, b"fd-out\\n")
os.write(2, b"fd-err\\n")
print("py-out", helper.VALUE)
print("py-err", file=sys.stderr)
os.system("echo child-out; echo child-err >&2")
os.environ["MCU_TEST_LEAK"] = "1"
sys.argv.append("leak")
signal.signal(signal.SIGTERM, signal.SIG_IGN)
warnings.simplefilter("error")
logging.getLogger().setLevel(logging.DEBUG)
torch.manual_seed(123)
torch.set_default_dtype(torch.float64)
example_inputs = (torch.randn(1, 4),)
"""


def _untimed(text: str) -> str:
    return re.sub(r"\d+\.\d s$", "T s", text, flags=re.M)


def test_the_in_process_runner_captures_every_stream_and_keeps_no_state(tmp_path: Path) -> None:
    """mcu_in_process, which most command tests use: a model file that prints through Python, the descriptors
    and a child process and changes the process's state prints what a real process prints, and the next
    test finds the state as it was."""
    import logging
    import os
    import signal
    import sys
    import warnings

    import torch

    before = (os.getcwd(), dict(os.environ), list(sys.argv), signal.getsignal(signal.SIGTERM), list(warnings.filters),
              logging.getLogger().level, torch.random.get_rng_state(), torch.get_default_dtype())
    for folder, value in (("a", 1), ("b", 2)):  # helper.py of the same name beside each model
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "helper.py").write_text(f"VALUE = {value}\n")
        (tmp_path / folder / "leaky.py").write_text(LEAKY_MODEL)
        argv = ("build", "--board", "mps2-an505", "--verbose", str(tmp_path / folder / "leaky.py"))
        proc = mcu_in_process(*argv)
        assert proc.returncode == 2 and proc.stderr.splitlines()[-1].startswith("mcu: error: "), proc.stderr
        assert "leaky.py: defines neither `model`" in proc.stderr
        for text in ("fd-out", "fd-err", f"py-out {value}", "py-err", "child-out", "child-err"):
            assert text in proc.stderr.splitlines(), proc.stderr  # --verbose replays the load's output on stderr
        real = run_mcu(*argv)
        assert (proc.returncode, proc.stdout, _untimed(proc.stderr)) == \
            (real.returncode, real.stdout, _untimed(real.stderr))
        after = (os.getcwd(), dict(os.environ), list(sys.argv), signal.getsignal(signal.SIGTERM),
                 list(warnings.filters), logging.getLogger().level, torch.random.get_rng_state(),
                 torch.get_default_dtype())
        assert after[:6] == before[:6] and torch.equal(after[6], before[6]) and after[7] == before[7]


@pytest.mark.parametrize("argv, fuse", [
    (["build", "--fuse-blocks", "{model}", "-b", "mps2-an505"], "auto"),
    (["build", "-b", "mps2-an505", "--fuse-blocks", "{model}"], "auto"),
    (["build", "--fuse-blocks", "all", "{model}", "-b", "mps2-an505"], "all"),
    (["build", "{model}", "--fuse-blocks", "-b", "mps2-an505"], "auto"),
    (["build", "{model}", "-b", "mps2-an505"], "off"),
])
def test_fuse_blocks_alone_before_the_model_file(argv: list[str], fuse: str) -> None:
    """--fuse-blocks takes an optional value: an existing file after it is the model, not the value."""
    from mcu.commands.cli import parse_args

    model = str(EXAMPLES / "mobilenet_v2.py")
    args = parse_args([a.format(model=model) for a in argv])
    assert (args.fuse_blocks, str(args.model)) == (fuse, model)


def test_fuse_blocks_value_that_is_no_choice_nor_file_is_refused() -> None:
    proc = mcu_in_process("build", "--fuse-blocks", "some", str(EXAMPLES / "mobilenet_v2.py"), "-b", "mps2-an505")
    assert proc.returncode == 2
    assert "invalid choice: 'some'" in proc.stderr
