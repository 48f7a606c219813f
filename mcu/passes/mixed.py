"""The weight precisions ``--quantize mixed`` can give one layer of a static int8 graph, with int8 activations:
int8 (as lowered), int4 (w4a8's s4 kernels, two weights a byte) and look-up tables of 2, 3 or 4 bits per
output channel (mcu/passes/palette.py). Each is a rewrite of the op's weight and per-channel constants, after
the int8 lowering, that the kernels and the integer reference read as they read a w4a8 or
``--weight-palette`` op; with its estimated instructions (its flash depends on the board's layout and
kernels: mcu/backends/mixed_flash.py).

int4 from int8 codes: the channel's scale grows by max|code| / 7 and each code becomes round(code * 7 /
max|code|) (half away from zero), so the largest weight keeps its value, as the w4a8 quantizer's absmax
observer would place it; the int32 bias and the requantization follow from the new scale, as the int8
lowering derives them."""

from __future__ import annotations

import math

import numpy as np

from mcu.ir import Op, QuantParams, Tensor
from mcu.layouts import channel_rows, set_channel_rows
from mcu.passes.mixed_s16 import A16, A16_RELATIVE_COST
from mcu.passes.palette import eligible, palettize_row
from mcu.passes.quantized.common import int_const
from mcu.reference import arith

INT8 = "int8"
INT4 = "int4"
LUT = {2: "lut2", 3: "lut3", 4: "lut4"}
CANDIDATES = (INT8, INT4, *LUT.values())

# Instructions per multiply-accumulate relative to the int8 kernel's, from whole-model runs on mps2-an505
# (README, "4-bit weights" and "Look-up-table weights"): the s4 kernels ran 2.5-3.6x int8 packed, the
# look-up-table kernels about 2x int8 compact. An estimate to rank layers, not a measurement.
RELATIVE_COST = {INT8: 1.0, INT4: 3.0, "lut2": 2.1, "lut3": 2.1, "lut4": 2.1, A16: A16_RELATIVE_COST}
# int8 instructions per multiply-accumulate on the M33 (small_cnn: 1,260,019 instructions for 1,016,384 MACs)
INT8_PER_MAC = 1.24


def layers(ops: list[Op]) -> list[int]:
    """Indices of the ops whose weights can narrow: int8 convolutions with one group, depthwise convolutions
    and linear layers with int8 constant weights."""
    return [i for i, op in enumerate(ops) if eligible(op) and op.output.dtype == "int8"]  # (not w8a16's)


def macs(op: Op) -> int:
    """Multiply-accumulates of a convolution, depthwise or linear op: each output value reads one weight row."""
    w = op.inputs[1]
    return op.output.numel * (w.numel // max(w.shape[0], 1))


def instructions(op: Op, candidate: str) -> int:
    return int(math.ceil(macs(op) * INT8_PER_MAC * RELATIVE_COST[candidate]))


def apply(op: Op, candidate: str) -> None:
    """Rewrites ``op`` (int8 as lowered) to ``candidate`` in place."""
    if candidate == INT8:
        return
    if candidate == INT4:
        _to_int4(op)
        return
    bits = int(candidate[3:])
    w = op.inputs[1]
    rows = channel_rows(w)
    set_channel_rows(w, np.stack([palettize_row(r, bits) for r in rows]))
    op.attrs["palette_bits"] = bits


def _to_int4(op: Op) -> None:
    x, w = op.inputs[0], op.inputs[1]
    assert w.quant is not None and x.quant is not None and op.output.quant is not None
    rows = channel_rows(w).astype(np.int64)
    top = np.maximum(np.abs(rows).max(axis=1), 1)
    scale8 = np.asarray(w.quant.scale, np.float64)
    codes = np.sign(rows) * np.floor(np.abs(rows) * 7 / top[:, None] + 0.5)
    scale4 = scale8 * top / 7
    channels = w.shape[0]
    wq = Tensor(name=w.name, shape=w.shape, dtype="int8", data=np.array(w.data, copy=True), dim_order=w.dim_order,
                quant=QuantParams(scale=tuple(float(s) for s in scale4), zero_point=(0,) * channels, axis=0,
                                  qmin=-7, qmax=7))
    set_channel_rows(wq, codes.astype(np.int8))
    s_x, s_o = float(x.quant.scale[0]), float(op.output.quant.scale[0])
    bias_real = np.asarray(op.attrs["bias_real"], np.float64)
    bias = np.clip(np.round(bias_real / (s_x * scale4)), -(2**31), 2**31 - 1)
    mults, shifts = zip(*(arith.quantize_multiplier(s_x * float(s) / s_o) for s in scale4))
    op.inputs[1:5] = [wq, int_const(op.inputs[2].name, bias), int_const(op.inputs[3].name, np.array(mults)),
                      int_const(op.inputs[4].name, np.array(shifts))]
    op.attrs["weight_bits"] = 4
    # the flash objective counts a 4-bit convolution on its own loops (no packed kernel, no scratch); a build
    # that asks for packed weights gives it the packed kernel's stream back (mcu/backends/portable/core.py)
    op.attrs["s4_stream"] = False
