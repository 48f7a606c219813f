"""Python integer references of the int8 kernels that replace fp32 islands (issue 18): bit for bit what
runtime_c/kernels/mcu_maximum_s8.c and mcu_minimum_s8.c compute."""

from __future__ import annotations

import numpy as np

from mcu.quant.reference import _finish, _operands, requantize


def _extreme(pick, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
             out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides, b_strides):
    a, b = _operands(a, b, rank, out_shape, a_strides, b_strides)
    a1 = requantize((a + int(a_offset)) << int(left_shift), a_multiplier, a_shift)
    b1 = requantize((b + int(b_offset)) << int(left_shift), b_multiplier, b_shift)
    return _finish(pick(a1, b1), out_multiplier, out_shift, output_offset, act_min, act_max)


def maximum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_maximum_s8 (TFLite MAXIMUM with its own output scale): a' and b' as in add_s8;
    out = clamp(rq(max(a', b'), out_multiplier, out_shift) + output_offset)."""
    return _extreme(np.maximum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)


def minimum_s8(a, b, *, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift=20,
               out_multiplier, out_shift, output_offset, act_min=-128, act_max=127, rank=None, out_shape=None,
               a_strides=None, b_strides=None) -> np.ndarray:
    """mcu_minimum_s8: as :func:`maximum_s8` with min(a', b')."""
    return _extreme(np.minimum, a, b, a_offset, b_offset, a_multiplier, a_shift, b_multiplier, b_shift, left_shift,
                    out_multiplier, out_shift, output_offset, act_min, act_max, rank, out_shape, a_strides,
                    b_strides)
