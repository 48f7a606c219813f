"""--quantize int4-weight: torchao's IntxWeightOnlyConfig(int4, PerGroup(32)) weights lowered to
linear_w4; the program file, the generated C on the host and the firmware on QEMU all equal the Python
reference bit for bit, and the result is torchao's own model up to float rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.program import format as fmt
from mcu.reference.int4 import unpack_int4
from mcu.quantize.torchao_int4 import int4_weight_model
from mcu.program.host import Program, ProgramError
from repo import requires_qemu

torch.manual_seed(0)


class Mlp(nn.Module):
    """Linear layers of the decoder's widths, one without a bias, one with 10 inputs (no groups of 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(96, 384)
        self.down = nn.Linear(384, 96, bias=False)
        self.narrow = nn.Linear(96, 10)
        self.out = nn.Linear(10, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.narrow(self.down(torch.tanh(self.up(x))))))


class Mlp32(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(64, 96)
        self.b = nn.Linear(96, 32, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


_CACHE: dict[tuple[str, str], mcu.api.CompiledModel] = {}
_MODELS: dict[str, nn.Module] = {}


def _compiled(name: str, mode: str = "int4-weight") -> mcu.api.CompiledModel:
    if (name, mode) not in _CACHE:
        if name not in _MODELS:
            _MODELS[name] = (Mlp if name == "mlp" else Mlp32)().eval()
        n_in = 96 if name == "mlp" else 64
        gen = torch.Generator().manual_seed(1)
        inputs = [(torch.randn(2, n_in, generator=gen) * s,) for s in (1.0, 0.1, 5.0)]
        _CACHE[name, mode] = mcu.compile(_MODELS[name], inputs[0], quantize=mode, test_inputs=inputs,
                                         name=f"{mode.replace('-', '_')}_{name}")
    return _CACHE[name, mode]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_lowering_keeps_torchaos_values_and_scales() -> None:
    cm = _compiled("mlp")
    assert cm.graph.op_counts()["linear_w4"] == 3 and cm.graph.op_counts()["linear"] == 1
    reasons = list(dict(cm.graph.fallbacks).values())
    assert len(reasons) == 1 and "not quantized" in reasons[0]  # 10 -> 4: torchao leaves it fp32
    q = int4_weight_model(cm.spec.model)
    w4 = [op for op in cm.graph.ops if op.kind == "linear_w4"]
    for op, layer in zip(w4, (q.up, q.down, q.narrow)):
        w = layer.weight
        assert op.attrs["group_size"] == 32
        np.testing.assert_array_equal(unpack_int4(op.inputs[1].data), w.qdata.numpy())
        np.testing.assert_array_equal(op.inputs[2].data, w.scale.numpy())
        assert op.inputs[1].nbytes == w.qdata.numel() // 2
    assert len(w4[1].inputs) == 3  # no bias: none stored


@pytest.mark.parametrize("mode, kind, tolerance", [("int4-weight", "linear_w4", 1e-5),
                                                    ("int4-dynamic", "linear_w4_dyn", 0.02)])
def test_int4_model_equals_torchao_and_the_reference(mode: str, kind: str, tolerance: float) -> None:
    cm = _compiled("mlp32", mode)
    assert cm.graph.op_counts() == {kind: 2}  # the ReLU fused into the first
    assert cm.reference_is_exact and cm.tolerances() is None
    torchao_model = int4_weight_model(cm.spec.model)
    for (x,) in cm.spec.test_inputs:
        got = cm.run_raw(x)[0]
        assert _same_bits(got, cm.reference_raw(x)[0])  # the program interpreter on the host
        assert _same_bits(cm.run_raw_c(x)[0], got)  # the generated C on the host
        want = torchao_model(x).detach().numpy().reshape(-1)
        # int4-dynamic: the error of 8-bit activations on top of torchao's int4 weights
        assert np.max(np.abs(got - want)) <= tolerance * max(1.0, float(np.abs(want).max()))


def _program_with_group(cm: mcu.api.CompiledModel, group: int) -> bytes:
    op = next(op for op in cm.graph.ops if op.kind.startswith("linear_w4"))
    kept = op.attrs["group_size"]
    op.attrs["group_size"] = group
    try:
        return cm.program_image().program
    finally:
        op.attrs["group_size"] = kept


@pytest.mark.parametrize("mode", ["int4-weight", "int4-dynamic"])
@pytest.mark.parametrize("group", [16, 48, 3, 0])
def test_program_loader_checks_the_group_size(group: int, mode: str) -> None:
    """The interpreter verifies a w4 instruction's group size against its operands before running: 16 needs
    twice the scales the operand holds, 48 does not divide 64 inputs, 3 is odd."""
    cm = _compiled("mlp32", mode)
    assert fmt.KERNEL_IDS["mcu_linear_w4_f32"] in range(230, 260)
    assert Program.load(_program_with_group(cm, 32)).method_names == ["forward"]
    with pytest.raises(ProgramError):
        Program.load(_program_with_group(cm, group))


@pytest.mark.parametrize("name", ["mlp"])
def test_int4_model_with_fp32_layers_runs_on_the_host(name: str) -> None:
    cm = _compiled(name)
    for (x,) in cm.spec.test_inputs:
        got = cm.run(x)[0].numpy()
        want = int4_weight_model(cm.spec.model)(x).detach().numpy()
        assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, float(np.abs(want).max()))


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("mode", ["int4-weight", "int4-dynamic"])
def test_int4_model_on_qemu(mode: str) -> None:
    cm = _compiled("mlp32", mode)
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    fp32 = mcu.compile(cm.spec.model, cm.spec.test_inputs[0], quantize="none", test_inputs=cm.spec.test_inputs,
                       name=f"{mode.replace('-', '_')}_mlp32_fp32")
    # 64x96 + 96x32 weights: 36 KiB at fp32, 4.5 KiB of int4 and 0.6 KiB of scales
    assert cm.build().flash_bytes < fp32.build().flash_bytes - 28_000
