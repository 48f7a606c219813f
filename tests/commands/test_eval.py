"""`mcu eval`: fp32, int8-reference and simulated-device accuracy on the model file's eval_data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, mcu_in_process
from mcu.commands.evaluate import sample_indices
from repo import EXAMPLES, requires_qemu

DIGITS = str(EXAMPLES / "digits_cnn.py")


@requires_qemu
def test_eval_digits_json_device_equals_reference() -> None:
    proc = mcu_in_process("eval", "--board", "mps2-an505", "--quantize", "int8", "--samples", "12", "--json", DIGITS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    r = json.loads(proc.stdout)
    assert r["metric"] == "top1" and r["samples"] == 360 and r["device_samples"] == 12
    assert r["compiled_by"] == "Python integer reference"
    # A trained model: int8 costs at most a couple of points here, and agrees with fp32 nearly always.
    assert r["fp32"] > 0.9 and r["compiled"] > 0.9 and abs(r["fp32"] - r["compiled"]) < 0.03
    assert r["agreement"] > 0.95
    # One firmware run over the 12 sampled images; every output equals the reference's bit for bit.
    assert r["device_equals_reference"] == 12 and r["passed"] is True
    assert r["device_predictions"] == r["reference_predictions"]
    assert len(r["device_predictions"]) == 12
    assert r["quantize"] == "int8" and 0 < r["model_flash_bytes"] < r["flash_bytes"]


@requires_qemu
def test_eval_digits_prints_the_three_accuracies() -> None:
    proc = mcu_in_process("eval", "--quantize", "int8", "--samples", "12", DIGITS)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "digits_cnn: eval_data, metric top1"
    assert lines[2].startswith("fp32, eager PyTorch") and lines[2].split()[-1] == "360"
    assert lines[3].startswith("int8, Python integer reference") and "agrees with fp32" in lines[3]
    assert lines[4].startswith("int8, mps2-an505 simulated") and lines[4].endswith("equal the reference on 12/12")
    assert re.fullmatch(r"flash: \d+ B for the model \(\d+ B of weights, and code, kernels, runtime\); \d+ B with the "
                        r"harness "
                        r"and its 12 vectors", lines[5])


def test_eval_without_eval_data_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n")
    assert_one_line_error(mcu_in_process("eval", str(f)), "defines no `eval_data`")


def test_eval_rejects_unknown_metric(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.randn(1, 4),)\n"
                 "eval_data = [(torch.randn(1, 4), 1)]\neval_metric = 'top3'\n")
    assert_one_line_error(mcu_in_process("eval", str(f)), "unknown eval_metric 'top3'")


@pytest.mark.parametrize("total,n,want", [(10, 50, list(range(10))), (360, 4, [0, 119, 239, 359]), (5, 1, [0])])
def test_sample_indices(total: int, n: int, want: list[int]) -> None:
    assert sample_indices(total, n) == want
