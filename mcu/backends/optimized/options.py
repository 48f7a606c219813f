"""The optimized backend's build options: the layout of int8 convolution and fully connected weights.

The command line's ``--compact-weights`` and the Python API's ``packed_weights=`` become these options at
the edge (:func:`mcu.api.backend_options`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OptimizedOptions:
    # True: int16, packed for the fastest kernel (mcu/backends/optimized/tuned.py; twice those weights'
    # flash); False: int8, for the compact kernels (mcu/backends/optimized/compact.py); None: packed while
    # the board's flash has room for them (compact.packed_by_default, settled per model).
    packed_weights: bool | None = None
    # True when the build left the layout open and the board's flash chose it (said in the build's report).
    chosen_for_board: bool = False
    # True when the build left the layout open and --quantize mixed's flash objective chose compact.
    chosen_for_flash: bool = False
