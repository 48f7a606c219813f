"""Where the checkout's examples are, the reference models, and the mark for tests that need the Arm
cross tools (arm-none-eabi-gcc and qemu-system-arm)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REFERENCE_MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder"]


def have_cross_tools() -> bool:
    return shutil.which("arm-none-eabi-gcc") is not None and shutil.which("qemu-system-arm") is not None


requires_qemu = pytest.mark.skipif(not have_cross_tools(),
                                   reason="needs arm-none-eabi-gcc and qemu-system-arm (run scripts/setup)")
