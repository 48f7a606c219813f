"""Packed int16 weights for the 16x8 (w8a16) convolution and fully connected layers on cores with the DSP
extension: ``mcu_conv2d_packed_s16`` and ``mcu_linear_packed_s16``.

The int8 weights are widened to int16 here, at compile time, and reordered so that the kernel's inner loop
(runtime_c/kernels/common/dot_packed_s16.h) pairs each int16 activation pair with a weight pair by one SMLAD
and spends no instruction on sign extension: per block of 4 output channels, per group of 4 window taps the 4
channels' taps in channel order, then each channel's last (taps % 4) taps; channels after the last whole block
as plain rows. The words hold two int16 values each (low half first) so the array is word aligned.

The cost is flash (twice those weights), so the optimized backend's weight layout decides as for int8
(mcu/backends/optimized/compact.py: packed while the board's flash has room, the portable 16x8 kernels
with int8 weights under ``--compact-weights``). Program files keep the int8 weights and the portable kernels
(same outputs, bit for bit).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcu.backends.calls import KernelCall, quant_locals
from mcu.backends.portable.conv import EMITTERS
from mcu.ir import Op, Tensor

KINDS = ("conv2d", "linear")
FUNCTIONS = {"conv2d": "mcu_conv2d_packed_s16", "linear": "mcu_linear_packed_s16"}


def pack_rows(w: np.ndarray) -> np.ndarray:
    """int8 weights (rows, taps) in window order -> the int32 words of the packed int16 stream."""
    rows, k = w.shape
    w = np.asarray(w, dtype=np.int64)
    flat = np.zeros(rows * k + (rows * k) % 2, dtype=np.int64)
    whole = k // 4 * 4
    blocks = rows // 4
    for b in range(blocks):
        blk = w[4 * b:4 * b + 4]
        quads = blk[:, :whole].reshape(4, whole // 4, 4).transpose(1, 0, 2).reshape(-1)
        flat[4 * b * k:4 * (b + 1) * k] = np.concatenate([quads, blk[:, whole:].reshape(-1)])
    flat[4 * blocks * k:rows * k] = w[4 * blocks:].reshape(-1)
    halves = flat & 0xFFFF
    words = halves[0::2] | (halves[1::2] << 16)
    return words.astype(np.uint32).view(np.int32)


def packed_tensor(op: Op) -> Tensor:
    """The op's packed weights (made once and kept on the op so every emission names one constant)."""
    cached = op.attrs.get("packed_weights_s16")
    if isinstance(cached, Tensor):
        return cached
    w = op.inputs[1]
    assert w.data is not None
    data = pack_rows(np.asarray(w.data, dtype=np.int8).reshape(w.shape[0], -1))
    t = Tensor(name=f"{w.name}_packed16", shape=(data.size,), dtype="int32", data=data)
    op.attrs["packed_weights_s16"] = t
    return t


def applies(op: Op) -> str | None:
    """Why the packed 16x8 kernels cannot serve ``op`` (None: they can)."""
    if op.kind not in KINDS or op.inputs[0].dtype != "int16" or op.output.dtype != "int16":
        return "not a 16x8 convolution or fully connected layer"
    w = op.inputs[1]
    if not w.is_constant or w.dtype != "int8" or op.attrs.get("palette_bits") or op.attrs.get("weight_bits") == 4:
        return "weights are not constant int8"
    if op.kind == "conv2d" and (op.attrs["groups"] != 1 or w.dim_order != (0, 2, 3, 1)):
        return "grouped convolution or weights not in OHWI order"
    if op.kind == "linear" and len(w.shape) != 2:
        return "weights are not a matrix"
    return None


def emit(op: Op, ref: Any) -> KernelCall:
    """The portable 16x8 call with the packed kernel and weights (the same params, quant and scratch)."""
    portable = EMITTERS[(op.kind, "int16")](op, ref)
    args = list(portable.args)
    args[4] = ref(packed_tensor(op))
    return KernelCall(FUNCTIONS[op.kind], args, [f"{FUNCTIONS[op.kind]}.c"], portable.params_type, portable.params,
                      locals=quant_locals(op, ref), headers=["mcu/kernels_s16.h"])
