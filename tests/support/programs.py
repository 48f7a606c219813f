"""Models for the program-file tests: the reference models plus digits_cnn, a zoo of every op kind the
reference models do not use, an autoencoder with three methods sharing weights (each compiled once per
process), and the check that a program run by the host extension equals the generated C bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcu.api import CompiledModel, compile_file
from mcu.program.methods import compile_methods
from mcu.program.writer import CompiledMethod
from mcu.program.host import Program
from repo import REFERENCE_MODELS

PROGRAM_MODELS = REFERENCE_MODELS + ["digits_cnn"]

# Every lowered op kind the reference models do not use (pools, pointwise, softmax, concat, pad,
# permute, batch norm, clamp, div), so each kernel id runs through the program path too.
ZOO_MODEL = """
import torch
from torch import nn
torch.manual_seed(1)
class Zoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8 * 4 * 4 * 2, 6)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        z = self.bn(y + 0.5)
        y = nn.functional.max_pool2d(y, 2)
        z = nn.functional.avg_pool2d(z, 2)
        y = torch.sigmoid(self.dw(y)) * torch.tanh(z)
        z = nn.functional.hardswish(z - y)
        z = torch.clamp(z, -0.5, 0.75)
        w = nn.functional.pad(torch.cat([y, z], dim=1), (1, 1, 1, 1), value=0.25)
        w = nn.functional.max_pool2d(w, 2, stride=2)
        s = torch.flatten(w.permute(0, 2, 3, 1), 1)[:, : 8 * 4 * 4 * 2]
        logits = self.fc(s) / 2.0
        return torch.softmax(logits, dim=1), w.mean(dim=(2, 3)), w[:, 1:9:2, 1:].mean(dim=(2, 3))
model = Zoo().eval()
example_inputs = (torch.randn(1, 3, 12, 12),)
calibration = [(torch.randn(1, 3, 12, 12),) for _ in range(8)]
test_inputs = [(torch.randn(1, 3, 12, 12),) for _ in range(2)]
"""

# An autoencoder whose three methods share the encoder and decoder weights.
TWO_METHOD_MODEL = """
import torch
from torch import nn
torch.manual_seed(2)
class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))
    def encode(self, x):
        return self.enc(x)
    def decode(self, z):
        return self.dec(z)
    def forward(self, x):
        return self.decode(self.encode(x))
model = AE().eval()
example_inputs = (torch.randn(1, 64),)
calibration = [(torch.randn(1, 64),) for _ in range(16)]
test_inputs = [(torch.randn(1, 64),) for _ in range(3)]
methods = {
    "forward": model,
    "encode": model.encode,
    "decode": {"fn": model.decode, "example_inputs": (torch.randn(1, 8),),
               "test_inputs": [(torch.randn(1, 8),) for _ in range(2)],
               "calibration": [(torch.randn(1, 8) * 2,) for _ in range(16)]},
}
"""

_CACHE: dict[tuple[str, str], object] = {}


def model_file(tmp_dir: Path, name: str, source: str) -> Path:
    path = tmp_dir / f"{name}.py"
    if not path.exists():
        path.write_text(source)
    return path


def zoo(tmp_path_factory: pytest.TempPathFactory, quantize: str) -> CompiledModel:
    key = ("zoo", quantize)
    if key not in _CACHE:
        path = model_file(tmp_path_factory.getbasetemp(), "zoo_model", ZOO_MODEL)
        _CACHE[key] = compile_file(path, quantize=quantize)
    return _CACHE[key]  # type: ignore[return-value]


def two_methods(tmp_path_factory: pytest.TempPathFactory, quantize: str) -> list[CompiledMethod]:
    key = ("two_methods", quantize)
    if key not in _CACHE:
        path = model_file(tmp_path_factory.getbasetemp(), "autoencoder", TWO_METHOD_MODEL)
        _CACHE[key] = compile_methods(path, quantize=quantize)
    return _CACHE[key]  # type: ignore[return-value]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_program_equals_generated_c(cm: CompiledModel, vectors: int = 3) -> None:
    prog = Program.load(cm.program_image(bundle_tests=True).program)
    forward = prog.method("forward")
    for x in cm.spec.test_inputs[:vectors]:
        enc = cm.encode_inputs(x)
        for got, want in zip(forward.run_raw(*enc), cm.host_model().run_physical(enc)):
            assert same_bits(got, want)
