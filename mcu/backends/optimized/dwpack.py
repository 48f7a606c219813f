"""Depthwise 3x3 stride-1 layers of small images with their per-channel constants packed ahead of time.

On cores with the DSP extension (Cortex-M4/M7/M33) the portable in-place depthwise kernel runs 3x3 layers on
channel planes of int16 (runtime_c/kernels/convolution/dw_plane_s8_dsp.h). Per group of four channels it widens
the int8 weights into doubled int16 lane pairs and builds the requantization words, and per call it checks every
channel's requantization against the planes' bounds: about 400 cycles a group plus 33 a channel, a tenth of a
6 x 6 layer's cycles and a quarter of a 3 x 3 one's. ``mcu_depthwise_conv2d_s8_planes`` reads those words
from flash instead (mcu/kernels_s8.h has the layout), built here with the bounds checked once.

Only layers whose planes the kernel runs as one band of one-step lines: lines of three pixels, or of six
without a clamp of the activation range (MCU_DWPL_KIND 3 and 6), the band within the planes' stack bytes. Those
are the layers where a group's set-up weighs against its few pixels; the larger images keep the portable kernel
(and its int8 weights: 21 bytes a channel with the bias and requantization, against 40 here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcu.backends.calls import KernelCall, conv_params_s8
from mcu.ir import Op, Tensor
from mcu.layouts import channel_rows
from mcu.plan.contracts import depthwise_inplace_ok

FUNCTION = "mcu_depthwise_conv2d_s8_planes"
SOURCE = "mcu_depthwise_conv2d_s8_planes.c"
MAGIC = 0x5057554D  # MCU_DWPL_MAGIC
MAGIC_SCALED = 0x5357554D  # MCU_DWPL_MAGIC_SCALED
SCALE = 14  # MCU_DWPL_PACKED_SCALE: a scaled channel's weights and bias times 2^(SCALE - R)
HEADER_WORDS = 3  # MCU_DWPL_HEADER_WORDS: magic, channels, output offset
CHANNEL_WORDS = 10  # MCU_DWPL_PACKED_WORDS: six weight words, bias, multiplier, C, R
PLANE_BYTES = 3584  # MCU_DWPL_BYTES of the Arm builds: the four planes of a group on the stack
WINDOW_MAX = 9 * 255 * 128  # MCU_DWPL_WINDOW_MAX: the largest |sum of a window's products|


def lines_of(h: int, w: int) -> tuple[bool, int, int]:
    """(transposed, lines, pixels a line): the planes' lines run along the image's longer side."""
    return (True, w, h) if h > w else (False, h, w)


def one_band(h: int, w: int) -> bool:
    """The four planes of every line of the image fit the kernel's stack bytes (mcu_dwpl_geometry's band)."""
    _, lines, length = lines_of(h, w)
    cols = (length + 4) & ~1
    return PLANE_BYTES // (4 * cols * 2) - 2 >= lines


def one_step(length: int, act_min: int, act_max: int) -> bool:
    """The lines take one step each: three pixels, or six without a clamp of the range (MCU_DWPL_KIND 3, 6)."""
    return length == 3 or (length == 6 and act_min <= -128 and act_max >= 127)


def quant_fits(bias: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, output_offset: int) -> bool:
    """Every channel within the planes' requantization (mcu_dwpl_quant_ok): R = -shift in [1, 24], a
    non-negative multiplier, with A = |bias| + WINDOW_MAX: A < 2^30 (the doubled accumulator) and
    A + |2 output_offset + 1| 2^(R-1) + 1 < 2^31 (the high word of the one-SMMLAR requantization)."""
    if not -128 <= output_offset <= 127:
        return False
    r = -shift.astype(np.int64)
    if np.any(r < 1) or np.any(r > 24) or np.any(multiplier.astype(np.int64) < 0):
        return False
    a = np.abs(bias.astype(np.int64)) + WINDOW_MAX
    hi = a + (abs(2 * output_offset + 1) << (r - 1)) + 1
    return bool(np.all(a < 2**30) and np.all(hi < 2**31))


def scaled_fits(bias: np.ndarray, shift: np.ndarray, output_offset: int, act: tuple[int, int]) -> bool:
    """The scaled form serves the layer: a ReLU folded into the range (all of int8, output offset -128: no sign
    correction), every R in [SCALE - 8, SCALE - 2] (e = SCALE - R in [2, 8]: the weights times 2^e stay int16,
    2^(e-2) an integer), the scaled accumulator 2^e (|bias| + WINDOW_MAX) below 2^31."""
    if output_offset != -128 or act[0] > -128 or act[1] < 127:
        return False
    e = SCALE + shift.astype(np.int64)
    if np.any(e < 2) or np.any(e > 8):
        return False
    return bool(np.all((np.abs(bias.astype(np.int64)) + WINDOW_MAX) << e < 2**31))


def pack(w: np.ndarray, bias: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, output_offset: int,
         transposed: bool, act: tuple[int, int]) -> np.ndarray:
    """The words mcu_depthwise_conv2d_s8_planes reads: the header, then per channel its kernel lines' lane pairs
    times f (f w_i0 | f w_i1 << 16, f w_i1 | f w_i2 << 16; line i the taps (i, j), or (j, i) for transposed
    planes), f bias, the multiplier, C, R. Where ``scaled_fits`` (``act``: the activation range) the scaled form
    (MAGIC_SCALED): f = 2^e, e = SCALE - R, C = 2^(e-2) + (2 output_offset + 1) 2^(SCALE-2), an output SMMLA and
    SSAT's shift; else f = 2 and C = (2 output_offset + 1) 2^(R-1). ``w``: (channels, 3, 3) int8."""
    scaled = scaled_fits(bias, shift, output_offset, act)
    taps = w.astype(np.int64).transpose(0, 2, 1) if transposed else w.astype(np.int64)
    r = -shift.astype(np.int64)
    f = np.int64(1) << (SCALE - r) if scaled else np.full(r.shape, 2, dtype=np.int64)
    lanes = (f[:, None, None] * taps) & 0xFFFF
    words = np.empty((w.shape[0], CHANNEL_WORDS), dtype=np.int64)
    words[:, 0:6:2] = lanes[:, :, 0] | lanes[:, :, 1] << 16
    words[:, 1:6:2] = lanes[:, :, 1] | lanes[:, :, 2] << 16
    words[:, 6] = f * bias.astype(np.int64)
    words[:, 7] = multiplier.astype(np.int64)
    if scaled:
        words[:, 8] = (f >> 2) + (2 * output_offset + 1) * (1 << (SCALE - 2))
    else:
        words[:, 8] = (2 * output_offset + 1) * (np.int64(1) << (r - 1))
    words[:, 9] = r
    head = np.array([MAGIC_SCALED if scaled else MAGIC, w.shape[0], output_offset], dtype=np.int64)
    flat = np.concatenate([head, words.reshape(-1)]) & 0xFFFFFFFF
    return flat.astype(np.uint32).view(np.int32)


def _constants(op: Op) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The op's weights (channels, 3, 3), biases, multipliers and shifts, or None when one is not constant."""
    w, b, mult, shift = op.inputs[1:5]
    if w.data is None or mult.data is None or shift.data is None or (b is not None and b.data is None):
        return None
    rows = channel_rows(w).astype(np.int8).reshape(w.shape[0], 3, 3)
    bias = np.zeros(w.shape[0], dtype=np.int64) if b is None else np.asarray(b.data, dtype=np.int64).reshape(-1)
    return rows, bias, np.asarray(mult.data, dtype=np.int64).reshape(-1), np.asarray(shift.data).reshape(-1)


def applies(op: Op) -> str | None:
    """Why the packed planes cannot serve ``op`` (None: they can); the core is the backend's concern."""
    if op.kind != "depthwise_conv2d" or not depthwise_inplace_ok(op) or op.inputs[0].dtype != "int8":
        return "not an int8 stride-1 depthwise layer of the input's size"
    w = op.inputs[1]
    n, c, h, wd = op.inputs[0].shape
    if (w.shape[2], w.shape[3]) != (3, 3) or c % 4 != 0 or len(op.inputs) < 5:
        return "not a 3x3 window over channels in groups of four"
    _, _, length = lines_of(h, wd)
    if not one_step(length, int(op.attrs["act_min"]), int(op.attrs["act_max"])) or not one_band(h, wd):
        return "the planes' lines are not one band of one-step lines (three pixels, six unclamped)"
    consts = _constants(op)
    if consts is None:
        return "weights or requantization not constant"
    _, bias, mult, shift = consts
    if not quant_fits(bias, mult, shift, int(op.attrs["output_offset"])):
        return "a channel's requantization outside the planes' bounds"
    return None


def growth(op: Op) -> int:
    """The flash bytes packing ``op`` adds at most (its words against its int8 weights; 0 where it does not apply)."""
    channels = int(op.inputs[1].shape[0])
    return 4 * (HEADER_WORDS + CHANNEL_WORDS * channels) - 9 * channels if applies(op) is None else 0


def packed_tensor(op: Op) -> Tensor:
    """The op's packed constants (made once and kept on the op so every emission names one constant)."""
    cached = op.attrs.get("planes_packed")
    if isinstance(cached, Tensor):
        return cached
    consts = _constants(op)
    assert consts is not None
    _, _, h, w = op.inputs[0].shape
    data = pack(*consts, int(op.attrs["output_offset"]), lines_of(h, w)[0],
                (int(op.attrs["act_min"]), int(op.attrs["act_max"])))
    t = Tensor(name=f"{op.inputs[1].name}_planes", shape=(data.size,), dtype="int32", data=data)
    op.attrs["planes_packed"] = t
    return t


def emit(op: Op, ref: Any) -> KernelCall | None:
    """The packed call where the plan put the output on the input (None: it did not, the kernel runs in place)."""
    if ref(op.inputs[0]) != ref(op.output):
        return None
    params_type, params = conv_params_s8(op)
    return KernelCall(FUNCTION, ["&params", ref(op.output), ref(packed_tensor(op))], [SOURCE], params_type, params)
