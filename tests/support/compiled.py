"""Example models compiled once per test process (per xdist worker) and shared by every test that asks
for the same (example, board, quantize mode); generated C, host libraries and firmware are cached on
disk by content (mcu.paths.cache_dir). An example is captured, quantized and lowered once per quantize
mode, whatever the number of boards it is compiled for (mcu.api.LoweredModel)."""

from __future__ import annotations

from mcu.api import CompiledModel, LoweredModel, lower_file
from repo import EXAMPLES

_LOWERED: dict[tuple[str, str], LoweredModel] = {}
_COMPILED: dict[tuple[str, str, str], CompiledModel] = {}


def lowered_model(name: str, quantize: str = "none") -> LoweredModel:
    key = (name, quantize)
    if key not in _LOWERED:
        _LOWERED[key] = lower_file(EXAMPLES / f"{name}.py", quantize=quantize)
    return _LOWERED[key]


def compiled_model(name: str, board: str = "mps2-an505", quantize: str = "none") -> CompiledModel:
    key = (name, board, quantize)
    if key not in _COMPILED:
        _COMPILED[key] = lowered_model(name, quantize).compile(board)
    return _COMPILED[key]
