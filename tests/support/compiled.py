"""Example models compiled once per test process (per xdist worker) and shared by every test that asks
for the same (example, board, quantize mode); generated C, host libraries and firmware are cached on
disk by content (mcu.paths.cache_dir). An example is captured, quantized and lowered once per quantize
mode, whatever the number of boards it is compiled for (mcu.api.LoweredModel)."""

from __future__ import annotations

import copy
import dataclasses

from mcu.api import CompiledModel, LoweredModel, lower_file
from mcu.passes.palette import palettize_weights
from repo import EXAMPLES

_LOWERED: dict[tuple[str, str, int | None], LoweredModel] = {}
_COMPILED: dict[tuple[str, str, str, int | None], CompiledModel] = {}


def lowered_model(name: str, quantize: str = "none", weight_palette: int | None = None) -> LoweredModel:
    """``weight_palette``: the palette pass on a copy of the same mode's lowered graph (it is to_graph's last
    step), so the capture and quantization are shared with the tests of that mode."""
    key = (name, quantize, weight_palette)
    if key not in _LOWERED:
        if weight_palette is None:
            _LOWERED[key] = lower_file(EXAMPLES / f"{name}.py", quantize=quantize)
        else:
            base = lowered_model(name, quantize)
            _LOWERED[key] = dataclasses.replace(base, graph=palettize_weights(copy.deepcopy(base.graph),
                                                                              weight_palette))
    return _LOWERED[key]


def compiled_model(name: str, board: str = "mps2-an505", quantize: str = "none",
                   weight_palette: int | None = None) -> CompiledModel:
    key = (name, board, quantize, weight_palette)
    if key not in _COMPILED:
        _COMPILED[key] = lowered_model(name, quantize, weight_palette).compile(board)
    return _COMPILED[key]
