"""`mcu debug`: the debug firmware's every op equals the integer reference, the int8
reference tracks eager fp32 per op (SQNR),
and a build with one op's output deliberately corrupted (the test-only MCU_TRACE_TEST_PERTURB flag) is
caught at that op, with its source line."""

from __future__ import annotations

import json

import pytest

from mcu.devtools.debug import debug_model
from repo import EXAMPLES, REFERENCE_MODELS, requires_qemu

BOARD = "mps2-an505"


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_every_op_on_the_device_equals_the_reference(compiled, name: str) -> None:
    report = debug_model(compiled(name, BOARD, "int8"))
    assert report.first_departure is None
    assert all(r.differing == 0 and r.elements > 0 for r in report.rows)
    assert "every op equals the reference" in report.table()
    # Every op has its fp32 counterpart (batch norm and activations followed through), and int8 tracks it:
    # a misaligned pair would score near 0 dB.
    assert all(r.sqnr_db is not None and r.sqnr_db > 20.0 for r in report.rows)


@requires_qemu
def test_a_perturbed_op_is_named_with_its_source_line(compiled) -> None:
    cm = compiled("ds_cnn", BOARD, "int8")
    target = cm.library.view.steps[3]  # a middle op: everything before it must still agree
    report = debug_model(cm, perturb_handle=target.index)
    first = report.first_departure
    assert first is not None and first.handle == target.index and first.name == target.name
    assert first.differing >= 1 and first.source.startswith("ds_cnn.py:")
    assert all(r.differing == 0 for r in report.rows if r.handle < target.index)
    assert f"first departure: op {target.index} {target.name}" in report.table()


@requires_qemu
def test_debug_command(capsys) -> None:
    from mcu.commands.cli import main

    assert main(["debug", "--board", BOARD, "-q", "int8", str(EXAMPLES / "small_cnn.py"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_departure"] is None and out["ops"] and all(o["differing"] == 0 for o in out["ops"])


def test_the_op_where_quantization_error_jumps_is_named() -> None:
    from mcu.devtools.debug import DebugReport, OpDiff

    def row(handle: int, sqnr: float | None, inputs: tuple[int, ...]) -> OpDiff:
        return OpDiff(handle, f"op{handle}", "k", f"model.py:{10 + handle}: `x`", 8, 0, 0.0, sqnr, 0.1, inputs)

    steady = DebugReport("t", [row(0, 45.0, ()), row(1, 44.0, (0,)), row(2, None, (1,)), row(3, 41.5, (1,))])
    assert steady.error_jump is None and "jumps" not in steady.table()
    jumpy = DebugReport("t", [row(0, 45.0, ()), row(1, 44.0, (0,)), row(2, None, (1,)), row(3, 31.0, (1,)),
                              row(4, 30.0, (3,))])
    op, fall = jumpy.error_jump
    assert op.handle == 3 and fall == pytest.approx(13.0)
    assert "quantization error jumps at op 3 op3: SQNR 13.0 dB below its inputs' (31.0 dB), at model.py:13" \
        in jumpy.table()
    # each op against its own inputs, not the op listed before it: op 2 (a branch at 30 dB) is listed before
    # op 3, which reads op 1 (44 dB) and falls 13 dB; op 4 adds the branch back and loses nothing
    branches = DebugReport("t", [row(0, 45.0, ()), row(1, 44.0, (0,)), row(2, 30.0, (0,)), row(3, 31.0, (1,)),
                                 row(4, 30.0, (2, 3))])
    op, fall = branches.error_jump
    assert op.handle == 2 and fall == pytest.approx(15.0)
    assert DebugReport("t", branches.rows[:2] + branches.rows[3:]).error_jump[0].handle == 3
