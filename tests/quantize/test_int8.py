"""int8: the Python integer reference, the host build of the generated C and the firmware in QEMU
agree bit for bit; accuracy on real data; quantization-aware training; fallbacks are reported."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import mcu
from cli_runner import mcu_in_process
from repo import EXAMPLES, REFERENCE_MODELS, requires_qemu

INT8_MODELS = REFERENCE_MODELS + ["digits_cnn"]


def _load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", INT8_MODELS)
def test_host_build_equals_reference(compiled, name: str) -> None:
    cm = compiled(name, quantize="int8")
    assert cm.graph.fallbacks == []
    assert all(t.dtype == "int8" for t in (*cm.graph.inputs, *cm.graph.outputs))
    for x in cm.spec.test_inputs[:8]:
        for ref, host in zip(cm.reference_raw(*x), cm.run_raw(*x)):
            assert ref.dtype == np.int8
            np.testing.assert_array_equal(host, ref)


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_int8_arena_is_at_most_fp32_over_3_5(compiled, name: str) -> None:
    int8, fp32 = compiled(name, quantize="int8"), compiled(name)
    assert int8.memory.arena_size * 3.5 <= fp32.memory.arena_size
    assert int8.memory.lower_bound <= int8.memory.arena_size <= int8.memory.live_set


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385"])
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_device_equals_reference(compiled, name: str, board: str) -> None:
    cm = compiled(name, board, "int8")
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)  # zero differences from the Python reference
    assert sim.instructions and sim.instructions > 0


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
def test_digits_accuracy_and_device_predictions(compiled) -> None:
    """fp32 vs int8 accuracy on the 360 held-out digits; the device predicts exactly what the reference does."""
    digits = _load_example("digits_cnn")
    cm = compiled("digits_cnn", quantize="int8")
    labels = digits.test_labels.numpy()
    assert len(cm.spec.test_inputs) == len(labels) >= 200
    with torch.no_grad():
        fp32_pred = digits.model(digits.x_test).argmax(dim=1).numpy()
    ref_logits = [cm.decode_outputs(cm.reference_raw(*x))[0] for x in cm.spec.test_inputs]
    ref_pred = np.array([int(np.argmax(v)) for v in ref_logits])
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    dev_pred = np.array([int(np.argmax(row[0])) for row in sim.outputs])
    np.testing.assert_array_equal(dev_pred, ref_pred)
    fp32_acc = float(np.mean(fp32_pred == labels))
    int8_acc = float(np.mean(ref_pred == labels))
    print(f"digits: fp32 accuracy {fp32_acc:.4f}, int8 {int8_acc:.4f}, device {np.mean(dev_pred == labels):.4f} "
          f"over {len(labels)} images")
    assert fp32_acc >= 0.95
    assert int8_acc >= fp32_acc - 0.01


@requires_qemu
@pytest.mark.qemu
def test_quantization_aware_training_keeps_parity() -> None:
    from mcu.quantize.flow import convert, prepare_qat

    digits = _load_example("digits_cnn")
    prepared = prepare_qat(digits.model, digits.example_inputs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        opt = torch.optim.SGD(prepared.parameters(), lr=1e-3, momentum=0.9)
        for start in range(0, len(digits.x_train), 32):  # one epoch
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(prepared(digits.x_train[start:start + 32]),
                                                     digits.y_train[start:start + 32])
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    quantized = convert(prepared)
    tests = digits.test_inputs[:40]
    cm = mcu.compile(quantized, digits.example_inputs, board="mps2-an505", quantize="int8", test_inputs=tests,
                     name="digits_qat")
    assert cm.graph.fallbacks == []
    for x in tests:
        for ref, host in zip(cm.reference_raw(*x), cm.run_raw(*x)):
            np.testing.assert_array_equal(host, ref)
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    preds = np.array([int(np.argmax(row[0])) for row in sim.outputs])
    labels = digits.test_labels.numpy()[:40]
    assert float(np.mean(preds == labels)) >= 0.9


FALLBACK_MODEL = """
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        # (arithmetic with a scalar is an int8 table lookup; sub and div of tensors are int8,
        # var is an fp32 island: mcu/passes/quantized/fp32_islands.py)
        y = (y - torch.sigmoid(y)) / (y.var(dim=1, keepdim=True) + 1.0)
        return self.fc(torch.flatten(y, 1))
model = M()
example_inputs = (torch.randn(1, 1, 6, 6),)
calibration = [(torch.randn(1, 1, 6, 6),) for _ in range(8)]
"""


@requires_qemu
@pytest.mark.qemu
def test_fallback_ops_are_reported_and_still_exact(tmp_path: Path) -> None:
    f = tmp_path / "fallback.py"
    f.write_text(FALLBACK_MODEL)
    proc = mcu_in_process("run", "--board", "mps2-an505", "--quantize", "int8", "--json", str(f))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(proc.stdout)
    ops = " ".join(fb["op"] for fb in report["fp32_fallbacks"])
    assert "var" in ops and "div" not in ops and "sub" not in ops
    assert all(fb["reason"] for fb in report["fp32_fallbacks"])
    assert report["passed"] is True
    text = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "int8", "-o", str(tmp_path / "o"), str(f))
    assert "fp32 islands: 1 op (var x1: " in text.stdout and "fp32 fallback" not in text.stdout


@requires_qemu
@pytest.mark.qemu
def test_run_json_reports_int8_fields() -> None:
    proc = mcu_in_process("run", "--board", "mps2-an505", "--quantize", "int8", "--json",
                          str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["quantize"] == "int8" and r["passed"] is True
    for key in ("instructions", "flash_bytes", "ram_bytes", "arena_bytes", "arena_lower_bound_bytes"):
        assert isinstance(r[key], int) and r[key] > 0
    raw = np.array(r["outputs_raw"][0][0])
    assert raw.dtype.kind == "i" and raw.min() >= -128 and raw.max() <= 127
    real = np.array(r["outputs"][0][0])
    assert real.shape == raw.shape == (1, 10)


class _Activations(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardswish(self.conv(x))
        y = torch.sigmoid(y) + torch.tanh(y)
        y = torch.nn.functional.max_pool2d(torch.relu(y), 2)
        y = torch.nn.functional.pad(y, (1, 1, 0, 0))
        z = torch.cat([y, y * y], dim=1).mean(dim=(2, 3))
        return torch.softmax(self.fc(z), dim=-1)


@requires_qemu
@pytest.mark.qemu
def test_pointwise_nonlinearities_become_tables_and_run_exactly() -> None:
    torch.manual_seed(1)
    model = _Activations().eval()
    x = torch.randn(1, 3, 8, 8)
    cm = mcu.compile(model, (x,), board="mps2-an505", quantize="int8",
                     calibration=[(torch.randn(1, 3, 8, 8),) for _ in range(8)])
    counts = cm.graph.op_counts()
    assert counts.get("lut", 0) == 3  # hardswish, sigmoid, tanh
    assert counts.get("softmax", 0) == 1 and counts.get("concat", 0) == 1 and counts.get("pad", 0) == 1
    for ref, host in zip(cm.reference_raw(x), cm.run_raw(x)):
        np.testing.assert_array_equal(host, ref)
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    assert int(np.argmax(sim.outputs[0][0])) == int(model(x).argmax())
