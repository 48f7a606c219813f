"""Where the non-Python parts of the toolkit live.

In a source checkout (or an editable install) the templates, C runtime, ports
and boards sit beside the package; a wheel installs them under ``mcu/_data``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_DATA_DIRS = ("codegen", "runtime_c", "boards", "ports")


@lru_cache(maxsize=1)
def data_root() -> Path:
    """The folder that holds codegen/, runtime_c/, boards/ and ports/."""
    for candidate in (_PACKAGE_DIR.parent, _PACKAGE_DIR / "_data"):
        if all((candidate / d).is_dir() for d in _DATA_DIRS):
            return candidate
    raise RuntimeError(f"mcu data folders {_DATA_DIRS} not found near {_PACKAGE_DIR}")


def codegen_dir() -> Path:
    return data_root() / "codegen"


def runtime_dir() -> Path:
    return data_root() / "runtime_c"


def boards_dir() -> Path:
    return data_root() / "boards"


def ports_dir() -> Path:
    return data_root() / "ports"


def renode_dir() -> Path:
    return data_root() / "renode"


def cache_dir() -> Path:
    """Build cache keyed by content (compiled plugins, firmware, host libraries)."""
    root = os.environ.get("MCU_CACHE_DIR")
    path = Path(root) if root else Path.home() / ".cache" / "mcu"
    path.mkdir(parents=True, exist_ok=True)
    return path


def kernels_dir() -> Path:
    """runtime_c/kernels: one folder per op family (its public kernels, one per file, and the internal
    headers only it uses) and common/ (the internal headers several families share)."""
    return runtime_dir() / "kernels"


def kernel_source(name: str) -> Path:
    """The file of one of mcu's own kernels by its file name (``mcu_conv2d_s8.c``), whichever family
    folder holds it; an absolute path (an external backend's or a user's kernel) is returned as it is."""
    if Path(name).is_absolute():
        return Path(name)
    found = sorted(kernels_dir().glob(f"*/{name}"))
    if len(found) != 1:
        raise FileNotFoundError(f"kernel source {name!r}: {len(found)} matches under {kernels_dir()}")
    return found[0]


def all_kernel_sources() -> list[Path]:
    """Every kernel source of runtime_c/kernels (each family's .c files), sorted by file name."""
    return sorted(kernels_dir().glob("*/*.c"), key=lambda p: p.name)
