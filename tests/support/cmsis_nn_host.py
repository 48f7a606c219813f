"""CMSIS-NN's own kernels as host libraries, for the tests that compare ours with them bit for bit: the tree
CMSIS_NN_PATH names (a checkout of github.com/ARM-software/CMSIS-NN), its portable C paths compiled with the
host compiler (no DSP or MVE on the host), and ctypes mirrors of its argument structures (arm_nn_types.h)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from pathlib import Path

import pytest


def cmsis_nn_root(sources: tuple[str, ...], needs: str) -> Path:
    """The tree CMSIS_NN_PATH names; skips the test (saying so) when it is unset or lacks ``sources``
    (paths under Source/)."""
    root = Path(os.environ.get("CMSIS_NN_PATH", ""))
    if not os.environ.get("CMSIS_NN_PATH") or not all((root / "Source" / s).exists() for s in sources):
        pytest.skip(f"CMSIS_NN_PATH does not name a CMSIS-NN tree with {needs}")
    return root


def host_library(root: Path, sources: list[Path], name: str) -> ctypes.CDLL:
    """``sources`` of the tree at ``root`` as one shared library, cached by their bytes."""
    from mcu.paths import cache_dir

    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    out = cache_dir() / f"cmsis-nn-{name}" / f"libcmsisnn_{name}_{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-std=c11", "-O1", "-shared", "-fPIC", f"-I{root / 'Include'}", *map(str, sources),
                        "-o", str(out), "-Wl,--no-undefined", "-lm"], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(out))


class Tile(ctypes.Structure):
    _fields_ = [("w", ctypes.c_int32), ("h", ctypes.c_int32)]


class Dims(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("h", ctypes.c_int32), ("w", ctypes.c_int32), ("c", ctypes.c_int32)]


class Act(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("max", ctypes.c_int32)]


class ConvParams(ctypes.Structure):
    _fields_ = [("input_offset", ctypes.c_int32), ("output_offset", ctypes.c_int32), ("stride", Tile),
                ("padding", Tile), ("dilation", Tile), ("activation", Act)]


class DwParams(ctypes.Structure):
    _fields_ = [("input_offset", ctypes.c_int32), ("output_offset", ctypes.c_int32), ("ch_mult", ctypes.c_int32),
                ("stride", Tile), ("padding", Tile), ("dilation", Tile), ("activation", Act)]


class FcParams(ctypes.Structure):
    _fields_ = [("input_offset", ctypes.c_int32), ("filter_offset", ctypes.c_int32), ("output_offset", ctypes.c_int32),
                ("activation", Act)]


class PerTensor(ctypes.Structure):
    _fields_ = [("multiplier", ctypes.c_int32), ("shift", ctypes.c_int32)]


class PerChannel(ctypes.Structure):
    _fields_ = [("multiplier", ctypes.c_void_p), ("shift", ctypes.c_void_p)]
