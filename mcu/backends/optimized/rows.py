"""The optimized backend's ops between the convolutions of a 1-D network (Conv1d layers run as
convolutions one row high, mcu/frontend/conv.py): its max pooling and its global average pooling, so that a
Conv1d / BatchNorm1d / ReLU / MaxPool1d / AdaptiveAvgPool1d / Linear stack stays in this backend from its
first convolution to its classifier.

* A max pooling one row high (MaxPool1d: ``kernel_h`` 1, no top padding) runs ``mcu_max_pool1d_s8``, the
  2-D kernel without its row loops and with the two-tap window unrolled.
* The mean over height and width (AdaptiveAvgPool1d(1), AdaptiveAvgPool2d(1)) runs ``mcu_mean_hw_s8``, whose
  DSP path (SXTAB16 sums of four channels) is the fastest kernel the library has for it.
* The layout change of a signal one row high (the model input's ``[N, C, L]`` seen as ``[N, C, 1, L]`` to
  channels last, or back) is a transpose of each sample's ``[C][L]`` bytes: ``mcu_transpose_s8`` gathers a
  column into word stores instead of the generic permute's per-element index walk.

All equal the portable kernels bit for bit (a maximum of codes; the same sum and requantization; the same
bytes moved), which program files run for them.
"""

from __future__ import annotations

from typing import Any

from mcu.backends.base import Constraint
from mcu.backends.calls import KernelCall
from mcu.backends.portable.pool import EMITTERS as PORTABLE_POOL
from mcu.ir import Op

ROW_WINDOW = Constraint("window more than one row high",
                        lambda op: op.attrs["kernel"][0] == 1 and op.attrs["padding"][0] == 0)
FUNCTION = "mcu_max_pool1d_s8"
TRANSPOSE = "mcu_transpose_s8"
_NCHW, _NHWC = (0, 1, 2, 3), (0, 2, 3, 1)


def row_transpose(op: Op) -> tuple[int, int, int] | None:
    """(outer, rows, cols) of the transpose a layout change of a one-row int8 tensor is, NCHW <-> NHWC
    (``[C][W]`` <-> ``[W][C]`` per sample), else None."""
    src, out = op.inputs[0], op.output
    if len(src.shape) != 4 or src.shape[2] != 1 or src.dtype != "int8":
        return None
    n, c, _, w = src.shape
    if src.dim_order == _NCHW and out.dim_order == _NHWC:
        return n, c, w
    if src.dim_order == _NHWC and out.dim_order == _NCHW:
        return n, w, c
    return None


ROW_LAYOUT = Constraint("not a one-row tensor's change between NCHW and NHWC",
                        lambda op: row_transpose(op) is not None)


def emit(op: Op, refs: Any) -> KernelCall:
    """The call for a max pooling or a mean that :data:`ROW_WINDOW` (or the mean's rule) admitted, or a layout
    change :data:`ROW_LAYOUT` admitted."""
    if op.kind == "layout":
        dims = row_transpose(op)
        assert dims is not None
        return KernelCall(TRANSPOSE, [*map(str, dims), refs(op.inputs[0]), refs(op.output)], [f"{TRANSPOSE}.c"],
                          operands=[op.inputs[0], op.output], scalars=list(dims))
    call = PORTABLE_POOL[(op.kind, "int8")](op, refs)
    if op.kind == "max_pool2d":
        call.function, call.sources = FUNCTION, [f"{FUNCTION}.c"]
    return call
