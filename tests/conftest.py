"""Shared fixtures: models are exported and compiled once per test session (per xdist worker);
generated C, host libraries and firmware are cached on disk by content (mcu.paths.cache_dir)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from mcu.api import CompiledModel, compile_file

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
REFERENCE_MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder"]

_COMPILED: dict[tuple[str, str, str], CompiledModel] = {}


def compiled_model(name: str, board: str = "mps2-an505", quantize: str = "none") -> CompiledModel:
    key = (name, board, quantize)
    if key not in _COMPILED:
        _COMPILED[key] = compile_file(EXAMPLES / f"{name}.py", board=board, quantize=quantize)
    return _COMPILED[key]


@pytest.fixture(scope="session")
def compiled() -> Callable[..., CompiledModel]:
    return compiled_model


def have_cross_tools() -> bool:
    return shutil.which("arm-none-eabi-gcc") is not None and shutil.which("qemu-system-arm") is not None


requires_qemu = pytest.mark.skipif(not have_cross_tools(),
                                   reason="needs arm-none-eabi-gcc and qemu-system-arm (run scripts/setup)")
