"""A sampled slice of the seams matrix (scripts/matrix runs all of it): int8 on every QEMU board, fp32 and
w4a8 on a core of each kind, as generated C and as a program file on the board's interpreter firmware, each
by a small example; and the script itself on one cell, with its refusal/failure rule."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from repo import ROOT, requires_qemu

# The cells: int8 on every board; fp32 on one core of each float kind (software float on the M0+, the M4's
# FPU, the M55's Helium); w4a8 on one core of each kernel family (plain C on the M3, DSP on the M33, Helium on
# the M55). The smallest models (fc_autoencoder's 1.1 MB of fp32 weights cost minutes to compile), the ones
# other tests compile too (shared builds). scripts/matrix runs every board with every mode.
CELLS = [("mps2-an505", "int8", "small_cnn"), ("mps2-an505", "w4a8", "small_cnn"),
         ("mps2-an386", "fp32", "small_cnn"), ("mps2-an386", "int8", "fc_autoencoder"),
         ("mps2-an385", "int8", "small_cnn"), ("mps2-an385", "w4a8", "fc_autoencoder"),
         ("mps2-an385-m0plus", "fp32", "small_cnn"), ("mps2-an385-m0plus", "int8", "fc_autoencoder"),
         ("mps3-an547", "fp32", "small_cnn"), ("mps3-an547", "int8", "small_cnn"), ("mps3-an547", "w4a8", "small_cnn")]
QUANTIZE = {"fp32": "none", "int8": "int8", "w4a8": "w4a8"}
# The matrix's other modes run end to end in C and program files in their own tests, on the host, where a
# board cell here would cost a compile and two simulator runs each: w8a16 (tests/quantize/test_w8a16.py)
# look-up-table weights (tests/passes/test_weight_palette.py) and mixed precision
# (tests/passes/test_mixed_precision.py); scripts/matrix --mode runs them on boards.
TESTED_ELSEWHERE = {"w8a16", "lut2", "lut3", "lut4", "mixed"}


def _matrix_module():
    if "seams_matrix" in sys.modules:
        return sys.modules["seams_matrix"]
    loader = importlib.machinery.SourceFileLoader("seams_matrix", str(ROOT / "scripts" / "matrix"))
    spec = importlib.util.spec_from_loader("seams_matrix", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["seams_matrix"] = module  # its dataclasses look their module up there
    loader.exec_module(module)
    return module


def test_the_sample_covers_every_board_and_each_kernel_family() -> None:
    matrix = _matrix_module()
    assert {(b, "int8") for b in matrix.BOARDS} <= {(b, m) for b, m, _ in CELLS}
    float_kinds = {"mps2-an385-m0plus", "mps2-an386", "mps3-an547"}  # software float, FPU, Helium
    kernel_families = {"mps2-an385", "mps2-an505", "mps3-an547"}  # plain C, DSP, Helium
    assert {b for b, m, _ in CELLS if m == "fp32"} == float_kinds
    assert {b for b, m, _ in CELLS if m == "w4a8"} == kernel_families
    assert {b for b, _, _ in CELLS} == set(matrix.BOARDS)
    assert QUANTIZE == {m: q for m, q in matrix.MODES.items() if m not in TESTED_ELSEWHERE}
    assert TESTED_ELSEWHERE < set(matrix.MODES)


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board,mode,example", CELLS)
def test_generated_c_and_program_file_on_board(compiled, board: str, mode: str, example: str) -> None:
    from mcu.program.run_model import run_program_model

    cm = compiled(example, board, QUANTIZE[mode])
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    fw = cm.build()
    assert fw.stack is not None and fw.stack.reserved_bytes < fw.ram_bytes
    res = run_program_model(cm)
    assert res.run.passed, res.run.console[-2000:]
    assert res.instructions and res.instructions > 0 and len(res.run.instructions) == len(cm.spec.test_inputs)


def test_exit_2_before_the_compile_is_a_refusal_after_it_a_failure() -> None:
    matrix = _matrix_module()
    cell = matrix.Cell("m", "b", "int8", "c")

    def classify(code: int, stderr: str):
        row = matrix.Row(cell, "fail")
        matrix._classify(subprocess.CompletedProcess([], code, "", stderr), row)
        return row.result, row.reason

    early = "mcu: capture  ... 1.0 s\nmcu: error: model too big (a board with more flash)\n"
    assert classify(2, early) == ("refused", "model too big (a board with more flash)")
    late = "mcu: capture  ... 1.0 s\nmcu: compile  ... 3.0 s\nmcu: error: cannot bound the stack\n"
    result, reason = classify(2, late)
    assert result == "fail" and "after the build started" in reason and "cannot bound the stack" in reason
    assert classify(1, late)[0] == "fail" and classify(134, "")[0] == "fail"
    assert classify(0, early)[0] == "pass"


@requires_qemu
@pytest.mark.qemu
def test_the_script_prints_the_table_and_writes_the_rows(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "matrix"), "--example", "small_cnn",
                           "--board", "mps2-an505", "--mode", "int8", "--output", "c", "--json-out", str(out),
                           "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[1/1" in proc.stderr  # progress
    rows = json.loads(out.read_text())
    assert len(rows) == 1 and rows[0]["result"] == "pass"
    assert all(rows[0][k] > 0 for k in ("instructions", "flash_bytes", "arena_bytes", "stack_bytes"))
    assert "small_cnn" in proc.stdout and "PASS" in proc.stdout and "total" in proc.stdout
