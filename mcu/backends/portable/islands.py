"""Emitters of the int8 kernels that replace fp32 islands (joins
:data:`mcu.backends.portable.core.EMITTERS`, program kernel ids 250-259): maximum, minimum and division take
the int8 add's broadcasting parameters (mcu_binary_s8_params); PReLU its slopes per channel."""

from __future__ import annotations

import math

from mcu.backends.calls import KernelCall, Ref, offsets, split_at
from mcu.ir import Op
from mcu.passes.layout import channels_last
from mcu.backends.portable.common import binary_s8 as _binary_s8


def prelu_params(op: Op) -> dict:
    """The fields of mcu_prelu_s8_params, in declaration order: element i takes slope (i / inner) % channels."""
    x, alpha = op.inputs
    rank = len(x.shape)
    last = rank > 2 and x.dim_order == channels_last(rank)
    inner = 1 if alpha.numel == 1 or last else math.prod(x.shape[2:])
    return {"size": x.numel, "channels": alpha.numel, "inner": inner,
            **offsets(op, "input_offset", "pos_multiplier", "pos_shift", "neg_multiplier", "neg_shift",
                      "output_offset", "act_min", "act_max")}


def _prelu_s8(op: Op, ref: Ref) -> KernelCall:
    x, alpha = op.inputs
    return KernelCall("mcu_prelu_s8", ["&params", ref(x), ref(alpha), ref(op.output)], ["mcu_prelu_s8.c"],
                      "mcu_prelu_s8_params", prelu_params(op), operands=[x, alpha, op.output])


def log_softmax_params(op: Op) -> dict:
    """The fields of mcu_log_softmax_s8_params, in declaration order."""
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    return {"outer": outer, "axis": axis, "inner": inner,
            **offsets(op, "input_multiplier", "log_multiplier", "output_offset")}


def _log_softmax_s8(op: Op, ref: Ref) -> KernelCall:
    table, x = op.inputs[1], op.inputs[0]
    return KernelCall("mcu_log_softmax_s8", ["&params", ref(table), ref(x), ref(op.output)], ["mcu_log_softmax_s8.c"],
                      "mcu_log_softmax_s8_params", log_softmax_params(op), operands=[table, x, op.output])


def emitters() -> dict:
    return {("maximum", "int8"): _binary_s8("maximum"), ("minimum", "int8"): _binary_s8("minimum"),
            ("div", "int8"): _binary_s8("div"), ("prelu", "int8"): _prelu_s8,
            ("log_softmax", "int8"): _log_softmax_s8}
