"""Example models compiled once per test process (per xdist worker) and shared by every test that asks
for the same (example, board, quantize mode); generated C, host libraries and firmware are cached on
disk by content (mcu.paths.cache_dir)."""

from __future__ import annotations

from mcu.api import CompiledModel, compile_file
from repo import EXAMPLES

_COMPILED: dict[tuple[str, str, str], CompiledModel] = {}


def compiled_model(name: str, board: str = "mps2-an505", quantize: str = "none") -> CompiledModel:
    key = (name, board, quantize)
    if key not in _COMPILED:
        _COMPILED[key] = compile_file(EXAMPLES / f"{name}.py", board=board, quantize=quantize)
    return _COMPILED[key]
