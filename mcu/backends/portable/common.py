"""Emitters the portable backend's op families share: float convolution, slicing, and the float and int8
elementwise binary ops (each family's module builds its own ops on these)."""

from __future__ import annotations

from typing import Callable

from mcu.backends.calls import KernelCall, Ref, act_bounds, at_source, operand_strides, shape4
from mcu.errors import McuError
from mcu.ir import DTYPE_BYTES, Op

def conv2d(op: Op, ref: Ref) -> KernelCall:
    x, w = op.inputs[0], op.inputs[1]
    b = op.inputs[2] if len(op.inputs) > 2 else None
    out = op.output
    params = {
        "input": shape4(x), "output": shape4(out),
        "kernel_h": w.shape[2], "kernel_w": w.shape[3],
        "stride_h": op.attrs["stride"][0], "stride_w": op.attrs["stride"][1],
        "pad_top": op.attrs["padding"][0], "pad_left": op.attrs["padding"][1],
        "dilation_h": op.attrs["dilation"][0], "dilation_w": op.attrs["dilation"][1],
        "groups": op.attrs["groups"], **act_bounds(op),
    }
    return KernelCall("mcu_conv2d_f32", ["&params", ref(x), ref(w), ref(b) if b is not None else "NULL", ref(out)],
                      ["mcu_conv2d_f32.c"], "mcu_conv2d_f32_params", params, operands=[x, w, b, out])


def binary(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a, b = op.inputs
        out = op.output
        rank = max(len(out.shape), 1)
        if rank > 6:
            raise McuError(f"{name} on rank-{rank} tensors is not supported (at most 6 dims){at_source(op)}")
        phys = list(out.physical_shape) or [1]
        a_str = operand_strides(a, out) or [0]
        b_str = operand_strides(b, out) or [0]
        pad = 6 - rank
        params = {"rank": rank, "out_shape": phys + [1] * pad, "a_strides": a_str + [0] * pad,
                  "b_strides": b_str + [0] * pad, **act_bounds(op)}
        return KernelCall(f"mcu_{name}_f32", ["&params", ref(a), ref(b), ref(out)], [f"mcu_{name}_f32.c"],
                          "mcu_binary_f32_params", params, operands=[a, b, out])
    return emit


def slice_call(op: Op, ref: Ref) -> KernelCall:
    src, out = op.inputs[0], op.output
    rank = len(src.shape)
    if rank > 6:
        raise McuError(f"slice of a rank-{rank} tensor is not supported (at most 6 dims){at_source(op)}")
    pad = 6 - rank
    start = [op.attrs["start"] if d == op.attrs["dim"] else 0 for d in src.dim_order]
    step = [op.attrs["step"] if d == op.attrs["dim"] else 1 for d in src.dim_order]
    params = {"rank": rank, "in_shape": list(src.physical_shape) + [1] * pad,
              "out_shape": list(out.physical_shape) + [1] * pad, "start": start + [0] * pad, "step": step + [1] * pad}
    return KernelCall("mcu_slice", ["&params", str(DTYPE_BYTES[src.dtype]), ref(src), ref(out)], ["mcu_slice.c"],
                      "mcu_slice_params", params, operands=[src, out])


def binary_s8(name: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a, b = op.inputs
        out = op.output
        rank = max(len(out.shape), 1)
        if rank > 6:
            raise McuError(f"{name} on rank-{rank} tensors is not supported (at most 6 dims){at_source(op)}")
        pad = 6 - rank
        at = op.attrs
        params = {"rank": rank, "out_shape": (list(out.physical_shape) or [1]) + [1] * pad,
                  "a_strides": (operand_strides(a, out) or [0]) + [0] * pad,
                  "b_strides": (operand_strides(b, out) or [0]) + [0] * pad,
                  "a_offset": int(at["a_offset"]), "b_offset": int(at["b_offset"]),
                  "a_multiplier": int(at.get("a_multiplier", 0)), "a_shift": int(at.get("a_shift", 0)),
                  "b_multiplier": int(at.get("b_multiplier", 0)), "b_shift": int(at.get("b_shift", 0)),
                  "left_shift": int(at.get("left_shift", 0)),
                  "out_multiplier": int(at["out_multiplier"]), "out_shift": int(at["out_shift"]),
                  "output_offset": int(at["output_offset"]),
                  "act_min": int(at["act_min"]), "act_max": int(at["act_max"])}
        return KernelCall(f"mcu_{name}_s8", ["&params", ref(a), ref(b), ref(out)], [f"mcu_{name}_s8.c"],
                          "mcu_binary_s8_params", params, operands=[a, b, out])
    return emit
