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
