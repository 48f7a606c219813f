"""The command line: subcommands, --help, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, run_mcu
from repo import EXAMPLES, requires_qemu


@pytest.mark.parametrize("sub", ["", "boards", "build", "run", "export", "eval", "ops"])
def test_help(sub: str) -> None:
    proc = run_mcu(*([sub] if sub else []), "--help")
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


def test_boards_lists_the_simulated_boards() -> None:
    proc = run_mcu("boards", "--json")
    assert proc.returncode == 0
    boards = {b["name"]: b for b in json.loads(proc.stdout)["boards"]}
    for name, core in [("mps2-an505", "cortex-m33"), ("mps2-an386", "cortex-m4"), ("mps2-an385", "cortex-m3")]:
        assert boards[name]["core"] == core
        assert boards[name]["simulator"] == "qemu"
    text = run_mcu("boards").stdout
    assert "mps2-an505" in text and "cortex-m33" in text


def test_model_file_without_model(tmp_path: Path) -> None:
    f = tmp_path / "empty.py"
    f.write_text("import torch\nexample_inputs = (torch.randn(1, 4),)\n")
    assert_one_line_error(run_mcu("build", "--board", "mps2-an505", str(f)), "empty.py", "model", "get_model")


def test_model_file_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(run_mcu("build", "--board", "mps2-an505", str(tmp_path / "nope.py")), "does not exist")


def test_model_file_that_raises(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text("import torch\n\nraise ValueError('boom')\n")
    assert_one_line_error(run_mcu("build", "--board", "mps2-an505", str(f)), "broken.py", "line 3", "boom")


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
    proc = run_mcu("build", "--board", "mps2-an505", str(f))
    assert_one_line_error(proc, "fft", "fft_model.py:4", "torch.fft.fft(x)")


def test_unknown_board() -> None:
    proc = run_mcu("build", "--board", "no-such-board", str(EXAMPLES / "small_cnn.py"))
    assert_one_line_error(proc, "no-such-board", "mps2-an505")


def test_model_too_large_for_the_board(tmp_path: Path) -> None:
    f = tmp_path / "wide.py"
    f.write_text(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU())\n"
        "example_inputs = (torch.randn(1, 3, 256, 256),)\n"
    )
    proc = run_mcu("build", "--board", "mps2-an505", str(f))
    assert_one_line_error(proc, "does not fit", "mps2-an505", "B too many")


def test_missing_cross_compiler(tmp_path: Path) -> None:
    proc = run_mcu("build", "--board", "mps2-an505", "-o", str(tmp_path / "out"), str(EXAMPLES / "fc_autoencoder.py"),
                   env={"MCU_ARM_GCC": str(tmp_path / "no-gcc")})
    assert_one_line_error(proc, "arm-none-eabi-gcc", "apt-get install")


def test_int8_without_calibration_says_what_to_add(tmp_path: Path) -> None:
    f = tmp_path / "nocal.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n")
    proc = run_mcu("build", "--board", "mps2-an505", "--quantize", "int8", str(f))
    assert_one_line_error(proc, "nocal.py", "calibration", "add `calibration =")


def test_calibration_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    f = tmp_path / "badcal.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n"
                 "calibration = [(torch.randn(1, 4),), (torch.randn(1, 5),)]\n")
    proc = run_mcu("build", "--board", "mps2-an505", "--quantize", "int8", str(f))
    assert_one_line_error(proc, "badcal.py", "calibration[1]", "[1, 5]", "[1, 4]")


@requires_qemu
def test_build_json_reports_sizes(tmp_path: Path) -> None:
    proc = run_mcu("build", "--board", "mps2-an505", "--json", "--quantize", "none", "-o", str(tmp_path / "out"),
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
    proc = run_mcu("export", "--board", "mps2-an505", str(f), "-o", str(tmp_path / "lib"))
    assert proc.returncode == 0, proc.stderr
    assert "int8_t" in (tmp_path / "lib" / "cal_model.h").read_text()
