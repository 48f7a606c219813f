"""w4a8 and fp32 where they meet the other options, on models as a new user writes them (an nn.Sequential stack,
dict outputs, MultiheadAttention, a GRU cell stepped in a Python loop), through ``mcu.compile`` on the host:
the program file the interpreter runs, the generated C and the integer reference give the same codes, with the
compact weights and with CMSIS-NN's kernels too; fp32 program files agree with the generated C and eager."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from mcu.backends.cmsis_nn import core as cmsis_nn
from mcu.errors import McuError

REAL = os.environ.get("CMSIS_NN_PATH")
needs_real = pytest.mark.skipif(not REAL or not cmsis_nn.is_tree(Path(REAL or ".")),
                                reason=f"{cmsis_nn.ENV_VAR} does not name a CMSIS-NN source tree")


class Heads(nn.Module):
    """Dropout and batch norm (which behave differently in training) feeding a dict of outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5),
                                  nn.Linear(32, 16), nn.ReLU())
        self.cls = nn.Linear(16, 5)
        self.reg = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.body(x)
        return {"logits": self.cls(h), "box": torch.sigmoid(self.reg(h))}


class Attend(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.fc(self.norm(x + y).mean(dim=1))


class CellLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 12)
        self.out = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(1, 12)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return self.out(h)


def _stack() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.2), nn.Linear(16, 10))


MODELS = {"stack": (_stack, (1, 1, 12, 12)), "heads": (Heads, (1, 12)), "attend": (Attend, (1, 6, 16)),
          "cell_loop": (CellLoop, (1, 5, 6))}


def _compile(name: str, quantize: str, **options):
    make, shape = MODELS[name]
    torch.manual_seed(5)
    model = make()  # left in training mode, as a notebook has it
    x = torch.randn(*shape)
    calibration = [(torch.randn(*shape),) for _ in range(6)]
    cm = mcu.compile(model, (x,), board="host", quantize=quantize, calibration=calibration, **options)
    return cm, model, x


def _same_codes(cm, x: torch.Tensor) -> None:
    program = [np.asarray(t).ravel() for t in cm.run(x, raw=True)]
    generated_c = [np.asarray(t).ravel() for t in cm.run_raw_c(x)]
    reference = [np.asarray(t).ravel() for t in cm.reference_raw(x)]
    assert len(program) == len(generated_c) == len(reference) == len(cm.graph.outputs)
    for p, c, r in zip(program, generated_c, reference):
        np.testing.assert_array_equal(p, c)
        np.testing.assert_array_equal(p, r)


@pytest.mark.parametrize("name", list(MODELS))
def test_w4a8_program_generated_c_and_reference_agree(name: str) -> None:
    cm, _, x = _compile(name, "w4a8")
    _same_codes(cm, x)


def test_w4a8_with_compact_weights_gives_the_same_codes() -> None:
    compact, _, x = _compile("stack", "w4a8", packed_weights=False)
    default, _, _ = _compile("stack", "w4a8")
    _same_codes(compact, x)
    for a, b in zip(compact.run(x, raw=True), default.run(x, raw=True)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@needs_real
@pytest.mark.parametrize("name", ["stack", "attend"])
def test_w4a8_with_cmsis_nn_kernels_matches_the_reference(name: str) -> None:
    cm, _, x = _compile(name, "w4a8", cmsis_nn=REAL)
    assert any(op.attrs.get("backend") == "cmsis-nn" for op in cm.graph.ops)
    reference = [np.asarray(t).ravel() for t in cm.reference_raw(x)]
    for c, r in zip(cm.run_raw_c(x), reference):
        np.testing.assert_array_equal(np.asarray(c).ravel(), r)


def test_w4a8_weight_palette_is_refused_by_the_api() -> None:
    with pytest.raises(McuError, match="--weight-palette needs --quantize int8|weight_palette"):
        _compile("heads", "w4a8", weight_palette=4)


@pytest.mark.parametrize("name", ["heads", "attend", "cell_loop"])
def test_fp32_program_file_matches_generated_c_and_eager(name: str) -> None:
    cm, model, x = _compile(name, "none")
    program = [np.asarray(t).ravel() for t in cm.run(x)]
    generated_c = [np.asarray(t).ravel() for t in cm.run_raw_c(x)]
    out = model.eval()(x)
    eager = [t.detach().numpy().ravel() for t in (out.values() if isinstance(out, dict) else [out])]
    for p, c, e in zip(program, generated_c, eager, strict=True):
        np.testing.assert_allclose(p, c, rtol=0, atol=1e-6)
        np.testing.assert_allclose(p, e, rtol=1e-4, atol=1e-5)
