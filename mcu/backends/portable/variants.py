"""Which of the portable backend's C kernels runs an int8 matrix op: a table of variants and where each applies.

Three levels of choice, each made once:

* Before the memory plan, the partitioner (mcu/backends/base.py) gives the op to a backend: CMSIS-NN,
  the optimized packed-weight kernels (mcu/backends/optimized/core.py) or the portable kernels.
* Here, at code generation, for ops the portable backend took: among kernels with *different
  contracts* (arguments, scratch, how the output may overlap the input). The first row of ``INT8_VARIANTS`` whose kind matches
  and whose ``applies`` holds is the kernel the generated C calls. Rows are ordered from the
  most specialised to the general kernel, which always applies.
* In C, at compile time: every kernel has its architecture paths behind feature macros in the
  same function (``__ARM_FEATURE_MVE``: Helium 16-lane int8 for Cortex-M55/M85,
  runtime_c/kernels/common/mve_s8.h, tested in tests/support/mve_cases.py;
  ``__ARM_FEATURE_DSP``: SXTB16/SMLAD dual MACs for Cortex-M4/M7/M33, runtime_c/kernels/common/simd_s8.h;
  ``MCU_S8_WIDE``: two pixels per SMLAL for the Cortex-M3 and the host, common/plain_s8.h; plain C
  loops for the Cortex-M0/M0+). The board's ``-mcpu``
  decides, so the generated C and program files are the same for every core, and every path
  is bit-exact with the Python reference (tests/kernels/test_kernels_s8.py, tests/kernels/test_kernels_s8_opt.py).

This module is plain data plus one lookup; mcu/backends/portable/conv.py builds the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mcu.plan.contracts import depthwise_inplace_ok, pointwise_ok
from mcu.ir import Op

# applies(op, same_place): same_place tells whether the memory plan put the output exactly on the input
Applies = Callable[[Op, bool], bool]


@dataclass(frozen=True)
class Variant:
    kind: str  # IR op kind
    function: str  # C kernel
    source: str  # file name under runtime_c/kernels/<family> (mcu.paths.kernel_source)
    applies: Applies
    in_place: bool = False  # the kernel takes the data once (input and output are the same bytes)
    note: str = ""


def _always(op: Op, same_place: bool) -> bool:
    return True


INT8_VARIANTS: list[Variant] = [
    Variant("conv2d", "mcu_conv2d_1x1_s8", "mcu_conv2d_1x1_s8.c", lambda op, same: pointwise_ok(op),
            note="1x1, stride 1, no padding, one group: pixel buffer, output may overlap the input either way"),
    # convolutions
    Variant("conv2d", "mcu_conv2d_grouped_s8", "mcu_conv2d_grouped_s8.c", lambda op, same: op.attrs["groups"] > 1,
            note="grouped (not depthwise): every group's window on the dual-MAC loop (window contract)"),
    Variant("conv2d", "mcu_conv2d_s8", "mcu_conv2d_s8.c", _always,
            note="general and grouped convolution; output pixels in memory order (window contract)"),
    Variant("depthwise_conv2d", "mcu_depthwise_conv2d_s8_inplace", "mcu_depthwise_conv2d_s8_inplace.c",
            lambda op, same: depthwise_inplace_ok(op) and same, in_place=True,
            note="stride 1, same size, planned in place: ring buffer of pad_top + 1 input rows"),
    Variant("depthwise_conv2d", "mcu_depthwise_conv2d_s8", "mcu_depthwise_conv2d_s8.c", _always,
            note="any stride, dilation, channel multiplier (window contract)"),
    Variant("linear", "mcu_linear_s8", "mcu_linear_s8.c", _always, note="fully connected, per-channel"),
]


def find_variant(op: Op, same_place: bool, table: list[Variant] | None = None) -> Variant | None:
    """The first variant of ``table`` (default INT8_VARIANTS) for ``op.kind`` that applies, or None."""
    for v in INT8_VARIANTS if table is None else table:
        if v.kind == op.kind and v.applies(op, same_place):
            return v
    return None


def select_variant(op: Op, same_place: bool, table: list[Variant] | None = None,
                   program: bool = False) -> Variant:
    """The first variant of ``table`` (default INT8_VARIANTS) for ``op.kind`` that applies."""
    v = find_variant(op, same_place, table)  # every row is portable C: the same for program files
    if v is not None:
        return v
    raise LookupError(f"no int8 kernel variant for {op.kind}")
