"""fp32 islands in int8 programs: one summary line (ops per kind with the reason, the share of the
instructions) and ``fp32_islands`` in ``--json``; ``PASS (int8, N fp32 islands)``; "predicted class" only
for class scores; ``mcu debug`` compares the int8 ops bit for bit and the islands with eager fp32 within a
tolerance, and catches a corrupted island and a corrupted int8 op after it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcu.commands.cli import main  # noqa: E402
from mcu.commands.reports import class_scores  # noqa: E402
from mcu.passes.quantized.fp32_islands import summarize  # noqa: E402
from repo import requires_qemu  # noqa: E402

BOARD = "mps2-an505"

# var has no int8 kernel (mcu/passes/quantized/fp32_islands.py): one fp32 island between int8 ops; one regression output
ISLAND_MODEL = """
import torch
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc = torch.nn.Linear(4 * 4 * 4, 1)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = (y - torch.sigmoid(y)) / (y.var(dim=1, keepdim=True) + 1.0)
        return self.fc(torch.flatten(y, 1))
model = M().eval()
example_inputs = (torch.randn(1, 1, 6, 6),)
calibration = [(torch.randn(1, 1, 6, 6),) for _ in range(8)]
"""


def test_islands_are_summarised_per_op_kind() -> None:
    fallbacks = [(f"add add_{i} (m.py:3)", "its output is not quantized") for i in range(5)]
    fallbacks += [("var var (m.py:4)", "no int8 kernel"), ("add add_9", "no int8 kernel")]
    s = summarize(fallbacks)
    assert s.count == 7 and s.ops == {"add": (6, "its output is not quantized; no int8 kernel"),
                                      "var": (1, "no int8 kernel")}
    assert s.line() == ("fp32 islands: 7 ops (add x6: its output is not quantized; no int8 kernel; "
                        "var x1: no int8 kernel)")
    assert s.to_json() == {"count": 7, "ops": {"add": {"count": 6, "reason": "its output is not quantized; no int8 "
                                                                             "kernel"},
                                               "var": {"count": 1, "reason": "no int8 kernel"}},
                           "instruction_share": None}


def test_predicted_class_only_for_class_scores() -> None:
    assert class_scores([np.zeros((1, 10))]) is not None and class_scores([np.zeros(4)]) is not None
    for shape in ((1, 1), (1, 16, 8), (1, 3, 8, 8), (1, 2000)):
        assert class_scores([np.zeros(shape)]) is None, shape
    assert class_scores([np.zeros((1, 10)), np.zeros((1, 4))]) is None


@pytest.fixture(scope="module")
def island_file(tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("islands") / "island.py"
    f.write_text(ISLAND_MODEL)
    return f


@requires_qemu
@pytest.mark.qemu
def test_run_reports_islands_in_one_line_and_in_json(island_file: Path, capsys) -> None:
    assert main(["run", "--board", BOARD, "--quantize", "int8", "--json", str(island_file)]) == 0
    report = json.loads(capsys.readouterr().out)
    islands = report["fp32_islands"]
    assert islands["count"] == 1 and islands["ops"] == {"var": {"count": 1, "reason": "no int8 kernel"}}
    assert 0.0 < islands["instruction_share"] < 1.0
    assert main(["run", "--board", BOARD, "--quantize", "int8", str(island_file)]) == 0
    text = capsys.readouterr().out
    assert f"PASS: 1 bundled test vectors on {BOARD} (int8, 1 fp32 island)" in text
    lines = [line for line in text.splitlines() if "fp32 island" in line and not line.startswith("PASS")]
    assert len(lines) == 1 and lines[0].startswith("fp32 islands: 1 op (var x1: no int8 kernel), ")
    assert lines[0].endswith("% of instructions")
    assert "predicted class" not in text  # a (1, 1) regression output


@requires_qemu
@pytest.mark.qemu
def test_debug_compares_int8_ops_bit_for_bit_and_islands_within_tolerance(island_file: Path) -> None:
    from mcu.api import compile_file
    from mcu.devtools.debug import debug_model

    cm = compile_file(island_file, board=BOARD, quantize="int8")
    report = debug_model(cm)
    islands = [r for r in report.rows if r.island]
    assert [r.name for r in islands] == ["var"] and report.first_departure is None
    assert islands[0].sqnr_db is not None and islands[0].sqnr_db > 20.0
    assert "every op equals the reference" in report.table() and "fp32 island ops (marked *): 1" in report.table()
    after = next(r for r in report.rows if r.handle > islands[0].handle and cm.graph.ops[r.handle].kind == "div")
    for target in (islands[0].handle, after.handle):  # the island itself, an int8 op that reads its output
        first = debug_model(cm, perturb_handle=target).first_departure
        assert first is not None and first.handle == target
