"""Packed weights for the optimized backend's kernel on cores with the DSP extension (Cortex-M4/M7/M33).

Convolutions (one group) and fully connected layers run ``mcu_conv2d_packed_s8``, whose weights
are rearranged here, at compile time, into the order its inner loop reads them
(runtime_c/kernels/convolution/gemm_s8_dsp.h says why): widened to int16 so no instruction is spent
on sign extension, four output channels interleaved so one LDM feeds four SMLADs, window taps
padded to a multiple of 4 and reordered 0, 2, 1, 3 within each group of four to match the
input column that SXTAB16 builds.

The optimized backend (mcu/backends/optimized/core.py) takes the ops :func:`applies` accepts and emits
their call with :func:`emit`. The kernel reads
each output pixel's window before writing it, and a pointwise layer's pixel before writing that
pixel, so it keeps the overlap contracts of the kernels it replaces (mcu/plan/contracts.py) and the
memory plan is the same. Program files are architecture independent, so they keep the portable
kernels for these ops (same outputs, bit for bit).

The cost is flash: the packed weights take twice the bytes of int8 weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcu.backends.calls import KernelCall, conv_params_s8, offsets
from mcu.backends.optimized.specialise import PIXEL4_STREAM_MIN
from mcu.ir import Op, Tensor

FUNCTION = "mcu_conv2d_packed_s8"
SOURCE = "mcu_conv2d_packed_s8.c"
TAPS_MAX = 640  # MCU_CONV_PACKED_TAPS_MAX in runtime_c/include/mcu/kernels_s8.h
MAGIC = 0x5043554D  # MCU_PACKED_MAGIC
FLAG_RIGHT = 1  # every shift in [-23, -1]: requantized from K words (the core's assembly)
FLAG_BYTES = 2  # weights as bytes, two channels a word (pack_layer_bytes): fully connected layers whose weights wait
FLAG_GROUP = 4  # the weights wait: a flat pointwise layer's pixel pairs share each read of a large stream
FLAG_SCALED = 8  # channels scaled to one shift, requantized by SMMLA and SSAT (pack_layer_scaled)
FLAG_ROWS = 16  # the blocks followed by the widened rows' section (rows_section)
# a window's tap words in the rows' layout (9 row + tap, -1 a zero): rows 0 and 1 by pairs of taps 0 to 7, row 2 by
# pairs with its tap 8 and a zero, then taps 8 of rows 0 and 1 (the kernel's slot of lone taps)
ROWS_TAPS = [*(9 * r + t for r in (0, 1) for t in range(8)), *range(18, 27), -1, 8, 17]
ROWS_COUT_MAX = 16  # MCU_K3C3_COUT_MAX (convolution/conv_k3c3_rows_s8_dsp.h)
SCALED_SHIFT = 14  # MCU_PACKED_SCALED_SHIFT: the shift every channel of a scaled stream is brought to
SCALED_TAPS_MAX = 304  # input channels whose pixel pairs' column (2 kp + 24 int16) fits the kernel's 640 + 24
BYTES_DB_MAX = (1 << 23) - 1  # |DB| bound of the byte stream (convolution/pair_bytes_s8_dsp.h)
X_MAX = 255  # |input + input offset| at the worst offset: int8 plus an offset in [-127, 128]


def x_max(input_offset: int) -> int:
    """The largest |input + input_offset| over int8 inputs."""
    return max(abs(-128 + int(input_offset)), abs(127 + int(input_offset)))


def padded_taps(k: int) -> int:
    return (k + 3) // 4 * 4


def pack_weights(w: np.ndarray) -> np.ndarray:
    """int8 weights (out_c, taps) in window order -> per block of 4 channels, per tap pair, the 4
    channels' int16 pairs as 32-bit words (low half: the first tap): shape (blocks, kp // 2 * 4)."""
    out_c, k = w.shape
    kp, op = padded_taps(k), padded_taps(out_c)
    full = np.zeros((op, kp), dtype=np.int64)
    full[:out_c, :k] = w
    full = full.reshape(op, kp // 4, 4)[:, :, [0, 2, 1, 3]].reshape(op // 4, 4, kp // 2, 2)
    pairs = full.transpose(0, 2, 1, 3)  # block, pair, channel, lane
    words = (pairs[..., 0] & 0xFFFF) | (pairs[..., 1] << 16)
    return words.astype(np.uint32).view(np.int32).reshape(op // 4, -1)


def packed_k(r: np.ndarray, output_offset: int) -> np.ndarray:
    """K = 2^30 + 2^(R+30) + output_offset 2^(31+R) of right shifts R in [1, 23] (int64): the kernel's
    requantization is floor((acc m + K - [acc < 0] 2^31) / 2^(31+R)) (convolution/gemm_s8_dsp.h,
    mcu_packed_rq_s8)."""
    r = np.asarray(r, dtype=np.int64)
    return (1 << 30) + np.left_shift(1, r + 30) + int(output_offset) * np.left_shift(1, r + 31)


def _requant_words(out_c: int, multiplier: np.ndarray, shift: np.ndarray,
                   output_offset: int) -> tuple[bool, np.ndarray]:
    """(FLAG_RIGHT, the four requantization words of each padded channel) as :func:`pack_layer` lays them."""
    op = padded_taps(out_c)
    if not -128 <= int(output_offset) <= 127:
        raise ValueError(f"output offset {output_offset} is not an int8 zero-point")
    m = np.zeros(op, dtype=np.int64)
    m[:out_c] = np.asarray(multiplier, dtype=np.int64)
    sh = np.full(op, -1, dtype=np.int64)
    sh[:out_c] = np.asarray(shift, dtype=np.int64)
    right = bool(np.all((sh >= -23) & (sh <= -1)))
    if right:
        k = packed_k(-sh, output_offset)
        return True, np.stack([k & 0xFFFFFFFF, k >> 32, m, -sh - 1], axis=1)
    zero = np.zeros(op, dtype=np.int64)
    return False, np.stack([zero, zero, m, sh], axis=1)


def _stream(out_c: int, kp: int, flags: int, output_offset: int, blocks: np.ndarray) -> np.ndarray:
    header = np.array([MAGIC, flags | ((int(output_offset) & 0xFF) << 8), out_c, kp], dtype=np.int64)
    words = np.concatenate([header, blocks.reshape(-1)])
    return (words & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def bytes_fit(w: np.ndarray, input_offset: int = 128) -> bool:
    """Whether :func:`pack_layer_bytes` can lay out ``w`` (int8, out_c x taps) exactly: in each pair of
    channels (A even, B odd) 256 wB + wA fits int16 (not wB = -128 with wA < 0), and max |x| sum |wB| < 2^23
    (|x| = |input + input_offset|, :func:`x_max`; the default offset is the worst) keeps B's sum inside the
    24 bits that survive the kernel's shift, whatever the input."""
    w = np.asarray(w, dtype=np.int64)
    w = w.reshape(w.shape[0], -1)
    full = np.zeros((padded_taps(w.shape[0]), w.shape[1]), dtype=np.int64)
    full[:w.shape[0]] = w
    a, b = full[0::2], full[1::2]
    return bool(not np.any((b == -128) & (a < 0))
                and np.all(x_max(input_offset) * np.abs(b).sum(axis=1) <= BYTES_DB_MAX))


def pack_weights_bytes(w: np.ndarray) -> np.ndarray:
    """int8 weights (out_c, taps) -> per block of 4 channels, per column word (taps ta, tb of the 0, 2, 1, 3
    order), the words of channels (0, 1) and (2, 3), each half 256 wB + wA: shape (blocks, kp)."""
    out_c, k = w.shape
    kp, op = padded_taps(k), padded_taps(out_c)
    full = np.zeros((op, kp), dtype=np.int64)
    full[:out_c, :k] = w
    full = full.reshape(op, kp // 4, 4)[:, :, [0, 2, 1, 3]].reshape(op, kp)
    halves = 256 * full[1::2] + full[0::2]  # (op / 2, kp): pair p = channels 2p, 2p + 1
    pairs = halves.reshape(op // 4, 2, kp // 2, 2)  # block, pair in block, column word, lane
    words = (pairs[..., 0] & 0xFFFF) | ((pairs[..., 1] & 0xFFFF) << 16)
    return words.transpose(0, 2, 1).astype(np.uint32).view(np.int32).reshape(op // 4, kp)


def pack_layer_bytes(w: np.ndarray, bias: np.ndarray | None, multiplier: np.ndarray, shift: np.ndarray,
                     output_offset: int = 0, group: bool = False, input_offset: int = 128) -> np.ndarray | None:
    """The stream of :func:`pack_layer` with the weights as bytes (FLAG_BYTES, :func:`pack_weights_bytes`):
    half the weights' bytes, for a fully connected layer whose weights sit in memory with wait states. A block
    is the accumulators' start (biases 0, 0, 2, 2), the weights, biases 1 and 3, the requantization words.
    None where the layout would not be exact for a layer of this ``input_offset`` (:func:`bytes_fit`; the default
    is the worst offset, a stream any layer of these weights may run)."""
    w = np.asarray(w, dtype=np.int64)
    if not bytes_fit(w, input_offset):
        return None
    out_c = w.shape[0]
    op = padded_taps(out_c)
    right, rq = _requant_words(out_c, multiplier, shift, output_offset)
    b = np.zeros(op, dtype=np.int64)
    if bias is not None:
        b[:out_c] = np.asarray(bias, dtype=np.int64)
    b = b.reshape(op // 4, 4)
    blocks = np.concatenate([b[:, [0, 0, 2, 2]], pack_weights_bytes(w).astype(np.int64), b[:, [1, 3]],
                             rq.reshape(op // 4, 16)], axis=1)
    flags = FLAG_BYTES | (FLAG_RIGHT if right else 0) | (FLAG_GROUP if group else 0)
    return _stream(out_c, padded_taps(w.shape[1]), flags, output_offset, blocks)


def pack_layer(w: np.ndarray, bias: np.ndarray | None, multiplier: np.ndarray, shift: np.ndarray,
               output_offset: int = 0, group: bool = False) -> np.ndarray:
    """The word stream mcu_conv2d_packed_s8 reads (runtime_c/include/mcu/kernels_s8.h): a header
    (magic, flags with the output offset in bits 8-15, output channels, padded taps), then per block
    of 4 output channels their biases, their packed weights (:func:`pack_weights`), then four words
    per channel so that the requantization takes one LDM per channel: when every shift is a right
    shift R in [1, 23] (FLAG_RIGHT) (K low word, K high word, multiplier, R - 1) with K from
    :func:`packed_k` (the output offset folded in), else (0, 0, multiplier, shift). Padded channels
    get bias 0 and multiplier 0 (their results are never stored). ``group``: FLAG_GROUP, the weights wait
    behind a cache the groups pay back in (:func:`groups_pay`: a large flat pointwise layer then runs its pixel
    pairs in groups)."""
    out_c = w.shape[0]
    op = padded_taps(out_c)
    right, rq = _requant_words(out_c, multiplier, shift, output_offset)
    b = np.zeros(op, dtype=np.int64)
    if bias is not None:
        b[:out_c] = np.asarray(bias, dtype=np.int64)
    blocks = np.concatenate([b.reshape(op // 4, 4), pack_weights(w).astype(np.int64), rq.reshape(op // 4, 16)],
                            axis=1)
    flags = (FLAG_RIGHT if right else 0) | (FLAG_GROUP if group else 0)
    return _stream(out_c, padded_taps(w.shape[1]), flags, output_offset, blocks)


def scaled_fit(w: np.ndarray, bias: np.ndarray | None, shift: np.ndarray, input_offset: int) -> np.ndarray | None:
    """The exponents e = 1 + SCALED_SHIFT + shift (in [2, 8]) of :func:`pack_layer_scaled`, per channel, or None where
    the layout is not exact for these weights: a right shift R = -shift outside [SCALED_SHIFT - 7, SCALED_SHIFT - 1],
    or an accumulator times 2^e outside int32 (|acc| <= max |x| sum |w| + |bias|, :func:`x_max`)."""
    r = -np.asarray(shift, dtype=np.int64).reshape(-1)
    if r.size == 0 or np.any(r < SCALED_SHIFT - 7) or np.any(r > SCALED_SHIFT - 1):
        return None
    e = 1 + SCALED_SHIFT - r
    w = np.asarray(w, dtype=np.int64).reshape(w.shape[0], -1)
    b = np.zeros(w.shape[0], dtype=np.int64) if bias is None else np.abs(np.asarray(bias, dtype=np.int64).reshape(-1))
    bound = x_max(input_offset) * np.abs(w).sum(axis=1) + b
    return e if bool(np.all(np.left_shift(bound, e) < 2**31)) else None


def pack_layer_scaled(w: np.ndarray, bias: np.ndarray | None, multiplier: np.ndarray, shift: np.ndarray,
                      output_offset: int = 0, group: bool = False, input_offset: int = 128) -> np.ndarray | None:
    """The stream of :func:`pack_layer` (FLAG_RIGHT | FLAG_SCALED) for a layer whose activation range starts at or above
    its output offset (a folded ReLU: the kernel requantizes without the sign's correction, as its ReLU tails do): each
    channel's weights and bias times 2^e, e = 1 + SCALED_SHIFT - R, so its accumulator is acc 2^e, and its four
    requantization words become two, (multiplier, C = 2^(e-2) + 2^(SCALED_SHIFT-1) + output_offset 2^SCALED_SHIFT), the
    four channels' pairs first in the block's 16 words (8 zeros after them). Then floor((acc m + K) / 2^(31+R)) of
    mcu_packed_rq_s8 (K = 2^30 + 2^(R+30) + output_offset 2^(31+R)), times 2^e above and below, is
    floor((acc 2^e m + C 2^32) / 2^(32+SCALED_SHIFT)): SMMLA (C + the product's high word, whose low word the
    floor drops) and SSAT with ASR #SCALED_SHIFT, two instructions an output. None where :func:`scaled_fit` says
    the layout is not exact."""
    e = scaled_fit(w, bias, shift, input_offset)
    if e is None:
        return None
    out_c = w.shape[0]
    op = padded_taps(out_c)
    ep = np.full(op, 2, dtype=np.int64)
    ep[:out_c] = e
    wide = np.asarray(w, dtype=np.int64).reshape(out_c, -1) * (1 << e[:, None])
    b = np.zeros(op, dtype=np.int64)
    if bias is not None:
        b[:out_c] = np.asarray(bias, dtype=np.int64).reshape(-1)
    m = np.zeros(op, dtype=np.int64)
    m[:out_c] = np.asarray(multiplier, dtype=np.int64).reshape(-1)
    if not -128 <= int(output_offset) <= 127:
        raise ValueError(f"output offset {output_offset} is not an int8 zero-point")
    c = np.left_shift(1, ep - 2) + (1 << (SCALED_SHIFT - 1)) + int(output_offset) * (1 << SCALED_SHIFT)
    rq = np.concatenate([np.stack([m, c], axis=1).reshape(op // 4, 8), np.zeros((op // 4, 8), dtype=np.int64)], axis=1)
    blocks = np.concatenate([(b << ep).reshape(op // 4, 4), pack_weights(wide).astype(np.int64), rq], axis=1)
    flags = FLAG_RIGHT | FLAG_SCALED | (FLAG_GROUP if group else 0)
    return _stream(out_c, padded_taps(w.shape[1]), flags, output_offset, blocks)


def rows_section(w: np.ndarray, bias: np.ndarray | None, multiplier: np.ndarray, shift: np.ndarray,
                 output_offset: int, input_offset: int) -> np.ndarray | None:
    """The words convolution/conv_k3c3_rows_s8_dsp.h reads of a 3x3 layer of 3 input channels (``w`` int8, out_c x 27
    in window order, out_c a multiple of 4), which would otherwise repack them on every call: per pair of output
    channels their biases times 2^e, per tap word (:data:`ROWS_TAPS`) the two channels' words, then (multiplier, C)
    of each channel, e and C as :func:`pack_layer_scaled` makes them, so that the requantization is one SMMLA and one
    SSAT an output; then the same pairs with the window rows reversed (at stride 2 down the kernel alternates the
    order of its row slots instead of copying the shared row). None where :func:`scaled_fit` says that layout is not
    exact (the kernel then repacks the blocks itself, or runs the layer by threes)."""
    w = np.asarray(w, dtype=np.int64).reshape(w.shape[0], -1)
    out_c = w.shape[0]
    e = scaled_fit(w, bias, shift, input_offset)
    if e is None or w.shape[1] != 27 or out_c % 4 != 0 or not -128 <= int(output_offset) <= 127:
        return None
    b = np.zeros(out_c, dtype=np.int64) if bias is None else np.asarray(bias, dtype=np.int64).reshape(-1)
    m = np.asarray(multiplier, dtype=np.int64).reshape(-1)
    c = np.left_shift(1, e - 2) + (1 << (SCALED_SHIFT - 1)) + int(output_offset) * (1 << SCALED_SHIFT)
    pairs = []
    for order in ([0, 1, 2], [2, 1, 0]):  # the window rows in slots 0, 1, 2, then reversed (the slots' other order)
        rows = np.zeros((out_c, 28), dtype=np.int64)
        rows[:, :27] = (w.reshape(out_c, 3, 9) << e[:, None, None])[:, order].reshape(out_c, 27)
        taps = rows[:, ROWS_TAPS].reshape(out_c, len(ROWS_TAPS) // 2, 2)  # index -1: the zero at 27
        words = (taps[..., 0] & 0xFFFF) | ((taps[..., 1] & 0xFFFF) << 16)  # (out_c, 14)
        pairs += [np.concatenate([(b[a:a + 2] << e[a:a + 2]), words[a:a + 2].T.reshape(-1),
                                  np.stack([m[a:a + 2], c[a:a + 2]], axis=1).reshape(-1)]) for a in range(0, out_c, 2)]
    return (np.concatenate(pairs) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def with_rows(stream: np.ndarray, section: np.ndarray) -> np.ndarray:
    """``stream`` (:func:`pack_layer`'s, FLAG_RIGHT) with :func:`rows_section`'s words after its blocks (FLAG_ROWS)."""
    out = np.concatenate([stream, section]).astype(np.int32)
    out[1] = int(out[1]) | FLAG_ROWS
    return out


def takes_rows(op: Op) -> bool:
    """Whether a layer may run from widened rows (mcu_k3c3_rows_applies behind the narrow path's mcu_narrow_applies):
    a 3x3 convolution of 3 input channels at stride 2 across, dilation 1 across, 4 to 16 output channels in fours,
    an activation range all of int8 from the output offset -128 (a first layer with its ReLU)."""
    if op.kind != "conv2d":
        return False
    p = conv_params(op)
    return ((p["kernel_h"], p["kernel_w"], p["input"]["c"], p["stride_w"], p["dilation_w"]) == (3, 3, 3, 2, 1)
            and p["output"]["c"] % 4 == 0 and p["output"]["c"] <= ROWS_COUT_MAX and p["pad_left"] >= 0
            and (p["act_min"], p["act_max"]) == (-128, 127) and p["act_min"] >= p["output_offset"])


# The op attribute the backend sets when the op's weights sit in memory with wait states (Context.weights_wait).
WEIGHTS_WAIT = "weights_wait"
# ... and when they are read through a cache that holds a part of a large stream (:func:`groups_pay`).
GROUP_READS = "group_reads"


def groups_pay(weights_wait: bool, weights_cache: int) -> bool:
    """Whether a flat pointwise layer's pixel pairs should share each read of a stream larger than a flash cache
    (FLAG_GROUP): its weights wait, behind a cache (Context.weights_cache) that holds a part of the stream, half
    of PIXEL4_STREAM_MIN, with the loop's code. Without wait states there is no miss to save; with a smaller
    cache for the weights' reads (the L4R5's 256 B) no part stays cached between the pairs: either way a
    group's extra calls (one per part and pair) cost more than they save."""
    return weights_wait and weights_cache >= PIXEL4_STREAM_MIN


def streams_bytes(op: Op) -> bool:
    """Whether a fully connected layer whose weights wait streams them as bytes (:func:`pack_layer_bytes`): its
    int16 stream outgrows a flash cache (a smaller one saves under a thousand cycles of misses, less than the
    byte path's code can cost in that cache: specialise.py leaves it out of builds without a byte stream) and
    the layout is exact for its weights and input offset."""
    if op.kind != "linear" or op.inputs[1].data is None:
        return False
    w = op.inputs[1]
    int16_bytes = 4 * (padded_taps(w.shape[0]) // 4) * (4 + 2 * padded_taps(window_taps(op)) + 16)
    return int16_bytes > PIXEL4_STREAM_MIN and bytes_fit(np.asarray(w.data), conv_params(op)["input_offset"])


def takes_scaled(op: Op) -> bool:
    """Whether a layer's stream may be scaled (:func:`pack_layer_scaled`): a flat pointwise convolution (1x1, stride 1,
    unpadded) of at least two pixels, whose channels in and out are multiples of 4, 8 in (mcu_pw8_pairs) or 16 to
    SCALED_TAPS_MAX (the pixel pairs' column; fewer take the narrow engine, with its own requantization), and whose
    activation range starts at or above its output offset (the pairs' ReLU tails): the pixel pairs' path, whose
    requantization the layout speeds up."""
    if op.kind != "conv2d":
        return False
    p = conv_params(op)
    i, o = p["input"], p["output"]
    flat = (p["kernel_h"], p["kernel_w"], p["stride_h"], p["stride_w"], p["pad_top"], p["pad_left"]) == (1, 1, 1, 1, 0, 0)
    return (flat and (i["h"], i["w"]) == (o["h"], o["w"]) and o["n"] * o["h"] * o["w"] >= 2
            and i["c"] % 4 == 0 and o["c"] % 4 == 0 and (i["c"] == 8 or 16 <= i["c"] <= SCALED_TAPS_MAX)
            and p["act_min"] >= p["output_offset"])


def window_taps(op: Op) -> int:
    w = op.inputs[1]
    return int(np.prod(w.shape[1:]))


KINDS = ("conv2d", "linear")  # the ops the packed kernel serves


def applies(op: Op) -> str | None:
    """Why the packed kernel cannot serve ``op`` (None: it can); the core is the backend's concern."""
    if op.output.dtype != "int8" or op.attrs.get("alias"):
        return "not an int8 op of ours"
    if op.kind not in KINDS or op.inputs[0].dtype != "int8":
        return "not a convolution or fully connected layer"
    if op.kind == "conv2d" and op.attrs["groups"] != 1:
        return "grouped convolution"
    if op.kind == "conv2d" and op.inputs[1].dim_order != (0, 2, 3, 1):
        return "weights are not in OHWI order"
    if op.kind == "linear" and len(op.inputs[1].shape) != 2:
        return "weights are not a matrix"
    if padded_taps(window_taps(op)) > TAPS_MAX:
        return f"window of {window_taps(op)} values is over the kernel's {TAPS_MAX}"
    return None


def packed_tensor(op: Op) -> Tensor:
    """The op's packed weights (made once and kept on the op so every emission names one constant)."""
    cached = op.attrs.get("packed_weights")
    if isinstance(cached, Tensor):
        return cached
    w, b, mult, shift = op.inputs[1:5]
    assert w.data is not None and mult.data is not None and shift.data is not None
    args = (np.asarray(w.data, dtype=np.int8).reshape(w.shape[0], -1),
            None if b is None or b.data is None else np.asarray(b.data).reshape(-1),
            np.asarray(mult.data).reshape(-1), np.asarray(shift.data).reshape(-1), conv_params(op)["output_offset"])
    wait, group = bool(op.attrs.get(WEIGHTS_WAIT)), bool(op.attrs.get(GROUP_READS))
    data = (pack_layer_bytes(*args, group=group, input_offset=conv_params(op)["input_offset"])
            if wait and streams_bytes(op) else None)
    if data is None and takes_scaled(op):
        data = pack_layer_scaled(*args, group=group, input_offset=conv_params(op)["input_offset"])
    if data is None:
        data = pack_layer(*args, group=group)
        section = rows_section(*args, input_offset=conv_params(op)["input_offset"]) if takes_rows(op) else None
        if section is not None and data[1] & FLAG_RIGHT:
            data = with_rows(data, section)
    t = Tensor(name=f"{w.name}_packed", shape=(data.size,), dtype="int32", data=data)
    op.attrs["packed_weights"] = t
    return t


def conv_params(op: Op) -> dict[str, Any]:
    """The mcu_conv2d_s8_params of ``op`` (a fully connected layer as a 1x1 convolution over rows)."""
    if op.kind == "conv2d":
        return conv_params_s8(op)[1]
    x, w = op.inputs[:2]
    out_f, in_f = w.shape
    rows = x.numel // in_f
    one = {"kernel_h": 1, "kernel_w": 1, "stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0,
           "dilation_h": 1, "dilation_w": 1}
    return {"input": {"n": rows, "h": 1, "w": 1, "c": in_f}, "output": {"n": rows, "h": 1, "w": 1, "c": out_f},
            **one, "groups": 1, **offsets(op, "input_offset", "output_offset", "act_min", "act_max")}


def emit(op: Op, ref: Any) -> KernelCall:
    packed = packed_tensor(op)  # holds the biases and requantization constants too
    return KernelCall(FUNCTION, ["NULL", "&params", ref(op.inputs[0]), ref(packed), ref(op.output)], [SOURCE],
                      "mcu_conv2d_s8_params", conv_params(op))
