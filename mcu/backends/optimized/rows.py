"""The optimized backend's ops between the convolutions of a 1-D network (Conv1d layers run as
convolutions one row high, mcu/frontend/conv.py): its max pooling and its global average pooling, so that a
Conv1d / BatchNorm1d / ReLU / MaxPool1d / AdaptiveAvgPool1d / Linear stack stays in this backend from its
first convolution to its classifier.

* A max pooling one row high (MaxPool1d: ``kernel_h`` 1, no top padding) runs ``mcu_max_pool1d_s8``, the
  2-D kernel without its row loops and with the two-tap window unrolled.
* The mean over height and width (AdaptiveAvgPool1d(1), AdaptiveAvgPool2d(1)) runs ``mcu_mean_hw_s8``, whose
  DSP path (SXTAB16 sums of four channels) is the fastest kernel the library has for it.

Both equal the portable kernels bit for bit (a maximum of codes; the same sum and requantization), which
program files run for them.
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


def emit(op: Op, refs: Any) -> KernelCall:
    """The call for a max pooling or a mean that :data:`ROW_WINDOW` (or the mean's rule) admitted."""
    call = PORTABLE_POOL[(op.kind, "int8")](op, refs)
    if op.kind == "max_pool2d":
        call.function, call.sources = FUNCTION, [f"{FUNCTION}.c"]
    return call
