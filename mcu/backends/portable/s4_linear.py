"""Which of mcu_linear_s4's DSP paths a model's build carries (runtime_c/kernels/fully_connected/mcu_linear_s4.c):
each path's code costs flash whether or not a layer runs it (fc_autoencoder's layers take only the three-row path:
its firmware on the M33 links 1,508 B of the kernel instead of 5,548), so a build defines 0 for those none of its
4-bit linear layers takes.
The dispatch here mirrors the kernel's; absent definitions build every path (program files)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from mcu.backends.calls import KernelCall
from mcu.ir import Op

ROWS3, ANY_SHIFT, PAIRS, PLAIN = "MCU_S4_FC_ROWS3", "MCU_S4_FC_ANY_SHIFT", "MCU_S4_FC_PAIRS", "MCU_S4_FC_PLAIN"
FLAGS = (ROWS3, ANY_SHIFT, PAIRS, PLAIN)
COL_MAX = 640  # MCU_S8_COL_MAX (kernels/common/simd_s8.h)
# The shifts the three-row path's own requantization takes (linear_s4_requantize); others take the general one.
ROWS3_SHIFTS = (-24, -1)


def linear_path(batch: int, in_features: int, out_features: int) -> str:
    """The DSP path mcu_linear_s4 runs a layer of these sizes on: its dispatch's conditions in its order."""
    if batch == 1 and in_features % 8 == 0 and in_features <= COL_MAX and out_features >= 3:
        return ROWS3
    if in_features <= COL_MAX if in_features % 2 == 0 else in_features < COL_MAX // 2:
        return PAIRS
    return PLAIN


def s4_linear_defines(calls: Iterable[tuple[Op, KernelCall]]) -> dict[str, int]:
    """The definitions for a model's 4-bit linear layers: 1 for each path one of them takes, and for the general
    requantization when a three-row layer has a shift outside ROWS3_SHIFTS; nothing without such layers."""
    taken: set[str] = set()
    for op, call in calls:
        if call.function != "mcu_linear_s4" or call.params is None:
            continue
        p = call.params
        path = linear_path(p["batch"], p["in_features"], p["out_features"])
        taken.add(path)
        if path == ROWS3:
            shift = op.inputs[4].data
            assert shift is not None
            s = np.asarray(shift).reshape(-1)
            if not bool(np.all((s >= ROWS3_SHIFTS[0]) & (s <= ROWS3_SHIFTS[1]))):
                taken.add(ANY_SHIFT)
    if not taken:
        return {}
    return {flag: int(flag in taken) for flag in FLAGS}


def s4_linear_merge(parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """One library of several methods: every path any method's layers take."""
    having = [p for p in parts if ROWS3 in p]
    return {flag: max(p[flag] for p in having) for flag in FLAGS} if having else {}
