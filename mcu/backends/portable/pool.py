"""Portable-backend emitters of the pooling family: max and average pooling, the mean over height and width
and adaptive average pooling to any size (NHWC, with the resampling kernels' parameter struct), fp32 and
int8."""

from __future__ import annotations

from typing import Callable

from mcu.backends.calls import KernelCall, Ref, act_bounds, offsets, shape4
from mcu.backends.portable.resample import resample_params
from mcu.ir import Op


def _pool(function: str, source: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a = op.attrs
        params = {
            "input": shape4(op.inputs[0]), "output": shape4(op.output),
            "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
            "stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "pad_bottom": a["padding"][0], "pad_right": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
            "count_include_pad": int(a.get("count_include_pad", True)),
            "divisor_override": int(a.get("divisor_override", 0)),
            **act_bounds(op),
        }
        return KernelCall(function, ["&params", ref(op.inputs[0]), ref(op.output)], [source],
                          "mcu_pool2d_f32_params", params, operands=[op.inputs[0], op.output])
    return emit


def _mean_hw(op: Op, ref: Ref) -> KernelCall:
    return KernelCall("mcu_mean_hw_f32", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_mean_hw_f32.c"],
                      "mcu_shape4", shape4(op.inputs[0]), operands=[op.inputs[0], op.output])


def _pool_s8(function: str, source: str) -> Callable[[Op, Ref], KernelCall]:
    def emit(op: Op, ref: Ref) -> KernelCall:
        a = op.attrs
        params = {"input": shape4(op.inputs[0]), "output": shape4(op.output),
                  "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
                  "stride_h": a["stride"][0], "stride_w": a["stride"][1],
                  "pad_top": a["padding"][0], "pad_left": a["padding"][1],
                  "act_min": int(a["act_min"]), "act_max": int(a["act_max"])}
        return KernelCall(function, ["&params", ref(op.inputs[0]), ref(op.output)], [source],
                          "mcu_pool2d_s8_params", params, operands=[op.inputs[0], op.output])
    return emit


def _mean_hw_s8(op: Op, ref: Ref) -> KernelCall:
    params = {"input": shape4(op.inputs[0]),
              **offsets(op, "input_offset", "multiplier", "shift", "output_offset", "act_min", "act_max")}
    return KernelCall("mcu_mean_hw_s8", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_mean_hw_s8.c"],
                      "mcu_mean_hw_s8_params", params, operands=[op.inputs[0], op.output])


def _pool_s16(function: str) -> Callable[[Op, Ref], KernelCall]:
    """16x8 max and average pooling (w8a16): CMSIS-NN's arm_max_pool_s16 and arm_avgpool_s16."""
    def emit(op: Op, ref: Ref) -> KernelCall:
        a = op.attrs
        params = {"input": shape4(op.inputs[0]), "output": shape4(op.output),
                  "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1], "stride_h": a["stride"][0],
                  "stride_w": a["stride"][1], "pad_top": a["padding"][0], "pad_left": a["padding"][1],
                  "act_min": int(a["act_min"]), "act_max": int(a["act_max"])}
        return KernelCall(function, ["&params", ref(op.inputs[0]), ref(op.output)], [f"{function}.c"],
                          "mcu_pool2d_s16_params", params, operands=[op.inputs[0], op.output],
                          headers=["mcu/kernels_s16.h"])
    return emit


def _mean_hw_s16(op: Op, ref: Ref) -> KernelCall:
    """The global mean of an NHWC int16 tensor: mcu_mean_s16 over [n][h*w][c] (w8a16)."""
    n, c, h, w = op.inputs[0].shape
    params = {"outer": n, "axis": h * w, "inner": c, **offsets(op, "multiplier", "shift", "act_min", "act_max")}
    return KernelCall("mcu_mean_s16", ["&params", ref(op.inputs[0]), ref(op.output)], ["mcu_mean_s16.c"],
                      "mcu_mean_s16_params", params, operands=[op.inputs[0], op.output],
                      headers=["mcu/kernels_s16.h"])


def _adaptive(suffix: str):
    # (the 16-bit kernel takes the int8 one's struct, as mcu_resize_bilinear_s16)
    params_suffix = "s8" if suffix == "s16" else suffix

    def emit(op: Op, ref: Ref) -> KernelCall:
        return KernelCall(f"mcu_adaptive_avg_pool_{suffix}", ["&params", ref(op.inputs[0]), ref(op.output)],
                          [f"mcu_adaptive_avg_pool_{suffix}.c"], f"mcu_resample_{params_suffix}_params",
                          resample_params(op), operands=[op.inputs[0], op.output],
                          headers=["mcu/kernels_s16.h"] if suffix == "s16" else [])
    return emit


EMITTERS = {
    ("max_pool2d", "float32"): _pool("mcu_max_pool2d_f32", "mcu_max_pool2d_f32.c"),
    ("avg_pool2d", "float32"): _pool("mcu_avg_pool2d_f32", "mcu_avg_pool2d_f32.c"),
    ("mean_hw", "float32"): _mean_hw,
    ("max_pool2d", "int8"): _pool_s8("mcu_max_pool2d_s8", "mcu_max_pool2d_s8.c"),
    ("avg_pool2d", "int8"): _pool_s8("mcu_avg_pool2d_s8", "mcu_avg_pool2d_s8.c"),
    ("mean_hw", "int8"): _mean_hw_s8,
    ("mean_hw", "int16"): _mean_hw_s16,
    ("max_pool2d", "int16"): _pool_s16("mcu_max_pool2d_s16"),
    ("avg_pool2d", "int16"): _pool_s16("mcu_avg_pool2d_s16"),
    ("adaptive_avg_pool", "float32"): _adaptive("f32"),
    ("adaptive_avg_pool", "int8"): _adaptive("s8"),
    ("adaptive_avg_pool", "int16"): _adaptive("s16"),
}
