"""Int8 weights for the dual-MAC kernel, ``mcu_conv2d_compact_s8``: the optimized backend's kernel when
the weights must keep their int8 flash (``--compact-weights``, and boards whose flash the packed int16
weights would not fit).

The weights are reordered here, at compile time, without growing: per block of 4 output channels and
per group of 4 window taps, one word per channel holding its 4 taps' bytes in order, so that one
LDRD fetches a group of two channels and SXTB16 widens each word into the (0, 2) and (1, 3) tap pairs
of the int16 column (runtime_c/kernels/convolution/mcu_conv2d_compact_s8.c says why two pixels share each widened
word). Biases and (multiplier, shift) sit in each block: 12 bytes per channel, as the portable kernels'
separate arrays. Program files keep the portable kernels (same bits).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from mcu.backends.optimized import dwpack, packed16, tuned
from mcu.backends.calls import KernelCall, conv_params_s8
from mcu.ir import Graph, Op, Tensor
from mcu.plan.contracts import s4_stream_bytes

FUNCTION = "mcu_conv2d_compact_s8"
SOURCE = "mcu_conv2d_compact_s8.c"
LINEAR_FUNCTION = "mcu_linear_compact_s8"
LINEAR_SOURCE = "mcu_linear_compact_s8.c"
MAGIC = 0x4B43554D  # MCU_COMPACT_MAGIC
RQ_ENTRY_BYTES = 24  # the kernel's requantization table, per channel (runtime_c/kernels/convolution/mcu_conv2d_compact_s8.c)
PACKED_SHARE = 0.75  # packed weights by default while the constants take at most this share of read-only memory


def packed_footprint(graph: Graph, board: Any) -> tuple[int, int]:
    """(the model's constants in bytes with the packing's growth, the bytes of read-only memory that
    hold them): packing widens each int8 convolution or linear weight to int16, and a small image's depthwise
    weights to their planes' words (dwpack.growth)."""
    constants = sum(t.nbytes for t in graph.constants())
    growth = sum(op.inputs[1].nbytes for op in graph.ops
                 if op.kind in ("conv2d", "linear") and len(op.inputs) > 1 and op.inputs[1].is_constant
                 and op.inputs[1].dtype == "int8" and op.attrs.get("weight_bits") != 4)
    growth += sum(dwpack.growth(op) for op in graph.ops if op.kind == "depthwise_conv2d")
    return constants + growth, board.region_for("rodata").length


def packed_by_default(graph: Graph, board: Any) -> bool:
    """The default weight layout for a board: packed int16 (the fastest) while the model's constants,
    grown by the packing, stay within PACKED_SHARE of the read-only memory that holds them (the rest is
    for code and the runtime); else int8 in flash with the compact kernels."""
    need, rom = packed_footprint(graph, board)
    return need <= PACKED_SHARE * rom


def pack_compact(w: np.ndarray, bias: np.ndarray | None, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The word stream mcu_conv2d_compact_s8 reads (runtime_c/include/mcu/kernels_s8.h) from int8 weights
    (out_c, taps) in window order: a header (magic, 0, output channels, padded taps), then per block of 4
    channels their 4 biases, their weight words (group-major: the 4 channels' words of taps 4g..4g+3),
    then (multiplier, shift) per channel. Padded channels and taps are zero."""
    out_c, k = w.shape
    kp, op = tuned.padded_taps(k), tuned.padded_taps(out_c)
    full = np.zeros((op, kp), dtype=np.int8)
    full[:out_c, :k] = w
    # (block, channel, group, 4 bytes) -> (block, group, channel) words
    words = full.reshape(op // 4, 4, kp // 4, 4).transpose(0, 2, 1, 3).copy().view(np.int32)
    words = words.reshape(op // 4, kp)
    b = np.zeros(op, dtype=np.int64)
    if bias is not None:
        b[:out_c] = np.asarray(bias, dtype=np.int64)
    mq = np.zeros((op, 2), dtype=np.int64)
    mq[:out_c, 0] = np.asarray(multiplier, dtype=np.int64)
    mq[:out_c, 1] = np.asarray(shift, dtype=np.int64)
    blocks = np.concatenate([b.reshape(op // 4, 4), words.astype(np.int64), mq.reshape(op // 4, 8)], axis=1)
    header = np.array([MAGIC, 0, out_c, kp], dtype=np.int64)
    stream = np.concatenate([header, blocks.reshape(-1)])
    return (stream & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def scratch_bytes(op: Op) -> int:
    """The kernel's _get_buffer_size: a convolution's requantization table and two pixels' columns (8
    bytes per tap) with 4 bytes to align them to 8; a linear layer's one row column (it requantizes
    from the stream: one row would not repay a table)."""
    taps = tuned.padded_taps(tuned.window_taps(op))
    if op.kind == "linear":
        return 2 * taps  # one row's column
    return tuned.padded_taps(op.inputs[1].shape[0]) * RQ_ENTRY_BYTES + 8 * taps + 4


def compact_tensor(op: Op) -> Tensor:
    """The op's stream (made once and kept on the op so every emission names one constant)."""
    cached = op.attrs.get("compact_weights")
    if isinstance(cached, Tensor):
        return cached
    w, b, mult, shift = op.inputs[1:5]
    assert w.data is not None and mult.data is not None and shift.data is not None
    data = pack_compact(np.asarray(w.data, dtype=np.int8).reshape(w.shape[0], -1),
                        None if b is None or b.data is None else np.asarray(b.data).reshape(-1),
                        np.asarray(mult.data).reshape(-1), np.asarray(shift.data).reshape(-1))
    t = Tensor(name=f"{w.name}_compact", shape=(data.size,), dtype="int32", data=data)
    op.attrs["compact_weights"] = t
    return t


def emit(op: Op, ref: Any) -> KernelCall:
    stream = compact_tensor(op)  # holds the biases and requantization constants too
    assert ref.scratch is not None, "the compact kernel's scratch was not planned"
    ctx = [f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};"]
    args = ["&ctx", "&params", ref(op.inputs[0]), ref(stream), ref(op.output)]
    if op.kind == "linear":
        params_type, params = conv_params_s8(op)
        return KernelCall(LINEAR_FUNCTION, args, [LINEAR_SOURCE], params_type, params, locals=ctx)
    return KernelCall(FUNCTION, args, [SOURCE], "mcu_conv2d_s8_params", tuned.conv_params(op), locals=ctx)


def unchanged_by_compact(graph: Graph, board: Any) -> str | None:
    """Why keeping the weights int8 (``--compact-weights``, packed_weights False) changed no layer of a graph built
    with it; None when it changed one: an int8 layer runs a compact kernel, a 16x8 layer the packed kernels
    would serve kept its int8 weights, or a 4-bit convolution that would widen its weights into the packed
    kernel's stream runs its own loops."""
    if graph.precision is not None and graph.precision.objective == "flash":
        return "--quantize mixed keeps int8 weights compact already (its objective is flash)"
    for op in graph.ops:
        if op.attrs.get("compact_kernel"):
            return None
        if board.dsp and op.attrs.get("backend") == "portable" and packed16.applies(op) is None:
            return None
        if op.attrs.get("weight_bits") == 4 and op.attrs.get("s4_stream") is False \
                and s4_stream_bytes(replace(op, attrs={**op.attrs, "s4_stream": True})):
            return None
    weighted = [op for op in graph.ops if op.kind in tuned.KINDS and len(op.inputs) > 1 and op.inputs[1].is_constant]
    if not any(op.inputs[1].dtype == "int8" and op.output.dtype in ("int8", "int16") for op in weighted):
        return "no convolution or linear layer has int8 weights and integer activations"
    if not any(op.attrs.get("weight_bits") == 4 and op.kind == "conv2d" for op in weighted) and not board.dsp:
        return f"the {board.core} has no DSP extension, so no packed kernel to keep its int8 weights from"
    return "no layer would run a packed kernel (its 4-bit layers are linear, or too small to stream their weights)"
