"""w8a16 on a Helium core (the MPS3 AN547's M55): the 16x8 convolution and linear kernels have no MVE path, so
the optimized backend's packed SMLAD kernels take them there as on the M33, while every int8 op stays on the
portable kernels' Helium paths. The firmware equals the integer reference bit for bit on the M55."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import mcu
from mcu.api import CompiledModel
from repo import requires_qemu

_MODELS: dict[str, CompiledModel] = {}


def _compiled(quantize: str) -> CompiledModel:
    if quantize not in _MODELS:
        torch.manual_seed(3)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                              nn.Flatten(), nn.Linear(8 * 6 * 6, 4)).eval()
        data = [(torch.randn(1, 3, 6, 6),) for _ in range(10)]
        _MODELS[quantize] = mcu.compile(model, data[0], board="mps3-an547", quantize=quantize, calibration=data[:8],
                                        test_inputs=data[8:])
    return _MODELS[quantize]


def _kernels(cm: CompiledModel) -> dict[str, str]:
    return {op.kind: op.attrs.get("backend", "") for op in cm.graph.ops if op.kind in ("conv2d", "linear")}


def test_w8a16_convolutions_take_the_packed_kernels_on_helium() -> None:
    cm = _compiled("w8a16")
    assert set(_kernels(cm).values()) == {"optimized"}
    assert "mcu_conv2d_packed_s16" in "".join(cm.firmware_sources().values())


def test_int8_stays_on_the_portable_helium_paths() -> None:
    cm = _compiled("int8")
    assert set(_kernels(cm).values()) == {"portable"}
    assert any("cortex-m55 has Helium" in r.why for r in cm.partitions.refusals)


@requires_qemu
def test_w8a16_on_the_m55_is_bit_exact() -> None:
    cm = _compiled("w8a16")
    assert "mcu_conv2d_packed_s16" in "".join(cm.firmware_sources().values())
    run = cm.simulate()
    assert run.passed and run.max_error_vs_expected == 0
    assert len(run.outputs_raw) == len(cm.expected_outputs) == 2
    for got, want in zip(run.outputs_raw, cm.expected_outputs):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(-1), np.asarray(w).reshape(-1))
