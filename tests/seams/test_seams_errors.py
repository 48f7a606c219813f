"""Bad input at the seams gets one line and exit 2 naming the file and the fix, in text and under --json (one JSON
object on stdout); what can work does work (dict and nested outputs); `mcu run --json` has one schema on every
board; the README's cheap figures hold. Each case runs the CLI in this process (cli_runner.mcu_in_process) on a
small model written here; the build stopped by SIGTERM runs as a real process."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_runner import mcu_in_process
from repo import requires_qemu

ROOT = Path(__file__).resolve().parents[2]
HAVE_ARM64 = (Path(sys.prefix) / "arm64-sysroot/usr/include/xnnpack.h").is_file() and \
    shutil.which("aarch64-linux-gnu-gcc") is not None and shutil.which("qemu-aarch64") is not None

HEAD = "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
MLP = HEAD + """model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
example_inputs = (torch.randn(1, 8),)
calibration = [(torch.randn(1, 8),) for _ in range(8)]
test_inputs = [(torch.randn(1, 8),) for _ in range(2)]
"""
NAN_CALIBRATION = HEAD + """model = nn.Sequential(nn.Linear(8, 4))
example_inputs = (torch.randn(1, 8),)
bad = torch.randn(1, 8)
bad[0, 3] = float("nan")
calibration = [(torch.randn(1, 8),), (bad,)]
"""
NAN_INSIDE = HEAD + """class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        return torch.log(y - y)


model = M()
example_inputs = (torch.randn(1, 8),)
calibration = [(torch.randn(1, 8),) for _ in range(3)]
"""
DICT_AND_LISTS = HEAD + """class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 4)
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        return {"logits": self.a(x), "extra": ([self.b(x)], [torch.relu(self.a(x))])}


model = M()
example_inputs = (torch.randn(1, 8),)
"""
NOT_A_TENSOR = HEAD + """class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 4)

    def forward(self, x):
        return self.a(x), "label"


model = M()
example_inputs = (torch.randn(1, 8),)
"""
THREE_UNSUPPORTED = HEAD + """class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        y = torch.cumprod(y, dim=1)
        y = torch.special.erfinv(torch.tanh(y) * 0.5)
        return torch.fft.fft(y).real


model = M()
example_inputs = (torch.randn(1, 8),)
"""
WRONG_EXAMPLE = HEAD + """model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
example_inputs = (torch.randn(1, 10),)
"""
# fp32 weights of 1100 x 1000: 4.4 MB of constants for a 4 MiB flash
TOO_BIG = HEAD + """model = nn.Sequential(nn.Linear(1100, 1000))
example_inputs = (torch.randn(1, 1100),)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _one_line_exit2(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mcu: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _json_failure(proc: subprocess.CompletedProcess, *needles: str) -> dict:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    obj = json.loads(lines[0])
    assert obj["exit"] == 2 and set(obj) >= {"error", "hint", "exit"}, obj
    for needle in needles:
        assert needle in obj["error"] + (obj["hint"] or ""), obj
    return obj


def _both(argv: list[str], *needles: str) -> str:
    """The failure in text (one line on stderr) and under --json (one object on stdout), same exit 2."""
    line = _one_line_exit2(mcu_in_process(*argv), *needles)
    _json_failure(mcu_in_process(*argv, "--json"), *needles)
    return line


def test_nan_in_calibration_names_the_item(tmp_path: Path) -> None:
    model = _write(tmp_path, "nan_calib", NAN_CALIBRATION)
    _both(["build", "--board", "mps2-an505", str(model), "-o", str(tmp_path / "o")],
          "nan_calib.py", "calibration[1] input 0 holds 1 NaN", "calibration at nan_calib.py:8", "finite")


def test_nan_made_inside_the_model_names_the_line(tmp_path: Path) -> None:
    model = _write(tmp_path, "nan_inside", NAN_INSIDE)
    _both(["build", "--board", "mps2-an505", str(model), "-o", str(tmp_path / "o")],
          "nan_inside.py:11", "torch.log(y - y)", "NaN or inf", "clamp")


def test_non_tensor_output_is_refused_in_one_line(tmp_path: Path) -> None:
    model = _write(tmp_path, "not_tensor", NOT_A_TENSOR)
    _both(["build", "--board", "mps2-an505", str(model), "-o", str(tmp_path / "o")],
          "not_tensor.py", "returns str 'label' as its output 1", "return tensors")


def test_dict_and_nested_list_outputs_run_and_are_named(tmp_path: Path) -> None:
    model = _write(tmp_path, "dict_out", DICT_AND_LISTS)
    proc = mcu_in_process("run", "--board", "host", "--json", str(model))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] and report["output_names"] == ["logits", "extra.0.0", "extra.1.0"]
    assert [len(o[0]) for o in report["outputs"][0]] == [4, 2, 4]
    out = tmp_path / "lib"
    proc = mcu_in_process("export", "--board", "mps2-an505", str(model), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    header = (out / "dict_out_model.h").read_text()
    assert '/* output 0: "logits"' in header and '/* output 2: "extra.1.0"' in header


def test_program_export_to_unwritable_path(tmp_path: Path) -> None:
    model = _write(tmp_path, "mlp", MLP)
    # /proc takes no new files, for root too (permission bits alone would not stop root)
    _one_line_exit2(mcu_in_process("export", "--format", "program", str(model), "-o", "/proc/model.mpk"),
                    "/proc/model.mpk", "cannot write", "-o")
    _both(["build", "--board", "mps2-an505", str(model), "-o", str(tmp_path / "o"), "--record",
                     "/proc/x.record"], "--record file /proc/x.record")


def test_a_model_that_cannot_fit_is_refused_before_generating(tmp_path: Path) -> None:
    model = _write(tmp_path, "too_big", TOO_BIG)
    out = tmp_path / "o"
    line = _both(["build", "--board", "mps2-an505", str(model), "-o", str(out)],
                 "too_big.py: model too_big does not fit mps2-an505", "constants need 4404", "4194304 B", "too many",
                 "weights of the linear in submodule 0: nn.Linear")
    need = int(re.search(r"constants need (\d+) B", line).group(1))
    assert need == 1100 * 1000 * 4 + 1000 * 4
    assert not list(out.rglob("*.c")), list(out.rglob("*"))  # nothing generated


def test_every_unsupported_op_in_one_run(tmp_path: Path) -> None:
    model = _write(tmp_path, "three", THREE_UNSUPPORTED)
    argv = ["build", "--board", "mps2-an505", str(model), "-o", str(tmp_path / "o")]
    proc = mcu_in_process(*argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    text = proc.stderr
    assert "ops cannot be lowered" in text
    for line, op in ((11, "cumprod"), (12, "erfinv"), (13, "_fft_r2c")):
        assert re.search(rf"^  .*aten\.{op}\.default.* at three\.py:{line}: ", text, re.M), text
    obj = _json_failure(mcu_in_process(*argv, "--json"), "cumprod", "erfinv", "_fft_r2c")
    assert "three.py:11" in obj["error"]


def test_example_inputs_shape_mismatch_names_their_line(tmp_path: Path) -> None:
    calib = _write(tmp_path, "wrong_calib", MLP.replace("calibration = [(torch.randn(1, 8),)",
                                                        "calibration = [(torch.randn(1, 9),)"))
    _both(["build", "--board", "mps2-an505", str(calib), "-o", str(tmp_path / "o")],
          "calibration[0] input 0 has shape [1, 9]",
          "calibration at wrong_calib.py:6, example_inputs at wrong_calib.py:5")
    model = _write(tmp_path, "wrong_example", WRONG_EXAMPLE)
    for quantize in ("none", "int8"):
        if quantize == "int8":
            model.write_text(WRONG_EXAMPLE + "calibration = [example_inputs]\n")
        _both(["build", "--board", "mps2-an505", "-q", quantize, str(model), "-o", str(tmp_path / "o")],
              "wrong_example.py", "example_inputs (wrong_example.py:5) has shapes [1, 10]", "layer '0' (Linear)")


@pytest.mark.parametrize("argv, needle", [
    (["run", "--board", "mps2-an505", "--prefill-chunk", "-3"], "argument --prefill-chunk: must be at least 1"),
    (["run", "--board", "mps2-an505", "--timeout", "0"], "argument --timeout: must be a number of seconds above 0"),
    (["eval", "--samples", "0"], "argument --samples/-n: must be at least 1"),
    (["run", "--board", "nope"], "unknown board 'nope'"),
    (["build", "--board", "mps2-an505", "--prefill-chunk", "4"], "--prefill-chunk applies to text-generation"),
])
def test_bad_options_are_one_line(tmp_path: Path, argv: list[str],
                                  needle: str) -> None:
    model = _write(tmp_path, "mlp", MLP)
    _both([*argv, str(model)], needle)


@requires_qemu
def test_flash_pico_names_the_pico(tmp_path: Path) -> None:
    model = _write(tmp_path, "mlp", MLP)
    # No serial port here: the first thing mcu flash needs after the build is the board's console.
    proc = mcu_in_process("flash", "--board", "pico", "--quiet", str(model), "-o", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    assert "Pico's console" in proc.stderr and "Pico 2" not in proc.stderr, proc.stderr


@requires_qemu
def test_killed_build_leaves_no_work_folder(tmp_path: Path) -> None:
    model = _write(tmp_path, "mlp", MLP)
    out = tmp_path / "o"
    out.mkdir()
    stale = out / ".firmware-build-999999999-abcd1234"  # above any pid_max: a build that is gone
    stale.mkdir()
    (stale / "obj.o").write_bytes(b"\0")
    proc = subprocess.Popen([sys.executable, "-m", "mcu.commands.cli", "build", "--board", "mps2-an505", "-q", "none",
                             str(model), "-o", str(out)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    live: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        live = [p for p in out.glob(".firmware-build-*") if p != stale]
        if live:
            break
        time.sleep(0.05)
    assert live, "the build never started compiling"
    assert not stale.exists()  # a dead build's folder is removed when the next build starts
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143 and "mcu: terminated" in err, (proc.returncode, err)
    assert not list(out.glob(".firmware-build-*")), list(out.iterdir())


@requires_qemu
def test_record_show_reads_a_record(tmp_path: Path) -> None:
    model = _write(tmp_path, "mlp", MLP)
    record = tmp_path / "mlp.record"
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quiet", str(model), "-o", str(tmp_path / "o"),
                       "--record", str(record))
    assert proc.returncode == 0, proc.stderr
    shown = mcu_in_process("record", "show", str(record))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("mlp int8 on mps2-an505: 2 ops"), lines[0]
    assert any(re.match(r"\s+0\s+addmm\s+mcu_\w+\s+1x16\s+128\s", ln) for ln in lines), shown.stdout
    as_json = json.loads(mcu_in_process("record", "show", "--json", str(record)).stdout)
    assert len(as_json["ops"]) == 2
    _both(["record", "show", str(tmp_path / "missing.record")], "missing.record", "mcu build --record")


RUN_BOARDS = ["host", pytest.param("arm64-linux", marks=pytest.mark.skipif(
    not HAVE_ARM64, reason="needs aarch64-linux-gnu-gcc, qemu-aarch64 and the arm64 sysroot (scripts/setup --arm64)")),
    pytest.param("mps2-an505", marks=requires_qemu)]


@pytest.fixture(scope="module")
def run_reports() -> dict[str, dict]:
    """The reports of the boards run so far, to compare each board with the ones before."""
    return {}


@pytest.mark.parametrize("board", RUN_BOARDS)
def test_run_json_has_one_schema_on_every_board(tmp_path: Path, board: str,
                                                run_reports: dict[str, dict]) -> None:
    model = _write(tmp_path, "mlp", MLP)
    proc = mcu_in_process("run", "--board", board, "--json", str(model))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    keys = {"model", "board", "quantize", "passed", "exit_code", "simulator", "instructions", "outputs",
            "outputs_raw", "output_names", "max_abs_error_vs_eager", "max_error_vs_expected", "same_top1",
            "flash_bytes", "ram_bytes", "arena_bytes", "fp32_fallbacks", "partitions", "delegated", "elf",
            "cycles", "ms", "timing"}
    assert keys <= set(report), keys - set(report)
    assert report["quantize"] == "int8" and report["passed"] and report["max_error_vs_expected"] == 0
    raw, real = report["outputs_raw"][0][0], report["outputs"][0][0]
    assert all(isinstance(v, int) and -128 <= v <= 127 for v in raw[0])  # int8 codes
    assert any(not float(v).is_integer() for v in real[0])  # real values, dequantized
    for other in run_reports.values():  # the same keys and the same outputs as the boards before
        assert set(other) == set(report)
        assert other["outputs_raw"] == report["outputs_raw"] and other["outputs"] == report["outputs"]
    run_reports[board] = report


def test_ci_workflow_installs_as_scripts_setup_does(tmp_path: Path) -> None:
    from mcu.commands.ci import TORCH_CPU_INDEX, TORCH_PIN, TORCHAO_PIN

    setup = (ROOT / "scripts" / "setup").read_text()
    assert f'"{TORCH_PIN}"' in setup and f'"{TORCHAO_PIN}"' in setup
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mlp.py").write_text(MLP)
    _one_line_exit2(mcu_in_process("ci", "--renode", "models/mlp.py", "-o", str(tmp_path), cwd=tmp_path),
                    "not a checkout of mcu", "--mcu-source")
    proc = mcu_in_process("ci", "--renode", "models/mlp.py", "-o", str(tmp_path), "--mcu-source", "vendor/mcu",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "vendor/mcu" in proc.stderr
    vendored = tmp_path / "vendor" / "mcu"
    (vendored / "scripts").mkdir(parents=True)
    shutil.copyfile(ROOT / "pyproject.toml", vendored / "pyproject.toml")
    shutil.copyfile(ROOT / "scripts" / "setup", vendored / "scripts" / "setup")
    proc = mcu_in_process("ci", "--renode", "models/mlp.py", "-o", str(tmp_path), "--mcu-source", "vendor/mcu",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    workflow = (tmp_path / ".github" / "workflows" / "mcu-renode.yml").read_text()
    assert f'pip install -q "{TORCH_PIN}" --index-url {TORCH_CPU_INDEX}' in workflow
    assert f'pip install -q "{TORCHAO_PIN}"' in workflow and 'pip install -q "./vendor/mcu"' in workflow
    assert "pip install mcu" not in workflow and "pip install -q torch " not in workflow


def test_readme_ops_count_is_mcu_ops() -> None:
    from mcu.commands.ops_listing import op_rows

    readme = (ROOT / "README.md").read_text()
    quoted = re.search(r"`mcu ops` lists the (\d+) ATen overloads", readme)
    assert quoted is not None
    assert int(quoted.group(1)) == len(op_rows())


def test_readme_compile_figures(compiled) -> None:
    """The figures the README quotes that a compile gives without running firmware: the demo table's arenas and
    the DS-CNN op count of the profile paragraph."""
    from mcu.devtools.ops import op_table

    readme = (ROOT / "README.md").read_text()
    arenas = re.search(r"^arena \(B\)\s+([\d,]+)\s+([\d,]+)$", readme, re.M)
    assert arenas is not None
    for quantize, quoted in zip(("none", "int8"), arenas.groups()):
        assert compiled("small_cnn", "mps2-an505", quantize).memory.arena_size == int(quoted.replace(",", ""))
    ops = re.search(r"On DS-CNN int8 \(mps2-an505\) the (\d+) ops add up to", readme)
    assert ops is not None
    cm = compiled("ds_cnn", "mps2-an505", "int8")
    assert len(op_table(cm.graph, cm.memory, cm.library)) == int(ops.group(1))


def test_readme_kernel_code_figures_are_the_table() -> None:
    """The mixed-precision section quotes the mps2-an505 kernel code the flash objective charges: those figures
    are mcu/backends/kernel_code.py's, so rewriting that table (bench/kernel_code.py --write) fails here until
    the README follows."""
    from mcu.backends.kernel_code import CODE_BYTES

    readme = (ROOT / "README.md").read_text()
    table = CODE_BYTES["mps2-an505"]
    quotes = [re.search(r"on mps2-an505 e\.g\. (.*?)\); another board", readme, re.S),
              re.search(r"(mps2-an505: `mcu_linear_s16` .*?) B\);", readme, re.S)]
    assert all(quotes)
    pairs = [p for q in quotes if q for p in re.findall(r"`(mcu_\w+)` ([\d,]+) B", q.group(1))]
    assert len(pairs) == 7
    assert all(table[name] == int(value.replace(",", "")) for name, value in pairs)
