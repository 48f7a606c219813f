"""Portable-backend emitters of the transposed convolution:
``mcu_conv_transpose2d_f32`` and ``mcu_conv_transpose2d_s8``. They take the convolution's parameter
structs and operands (mcu/backends/calls.py), so program files carry them like a convolution (kernel ids
100 and 101). conv1d and grouped convolution need nothing here: they are conv2d ops."""

from __future__ import annotations

from mcu.backends.portable.common import conv2d as _conv2d
from mcu.backends.calls import KernelCall, Ref, conv_params_s8, quant_locals, quant_operands
from mcu.ir import Op


def _conv_transpose2d(op: Op, ref: Ref) -> KernelCall:
    call = _conv2d(op, ref)
    return KernelCall("mcu_conv_transpose2d_f32", call.args, ["mcu_conv_transpose2d_f32.c"], call.params_type,
                      call.params, operands=call.operands)


def _conv_transpose2d_s8(op: Op, ref: Ref) -> KernelCall:
    x, w, b = op.inputs[:3]
    _, params = conv_params_s8(op)  # the convolution's struct: kind conv_transpose2d takes its conv2d form
    # weights packed by output phase (dilation 1, one group: mcu/passes/quantized/core.py) or OHWI
    function = "mcu_conv_transpose2d_phased_s8" if op.attrs.get("phased") else "mcu_conv_transpose2d_s8"
    return KernelCall(function, ["&ctx", "&params", "&quant", ref(x), ref(w), ref(b), ref(op.output)],
                      [f"{function}.c"], "mcu_conv2d_s8_params", params, locals=quant_locals(op, ref),
                      operands=quant_operands(op))


EMITTERS = {
    ("conv_transpose2d", "float32"): _conv_transpose2d,
    ("conv_transpose2d", "int8"): _conv_transpose2d_s8,
}
