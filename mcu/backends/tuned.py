"""Packed-weight kernels for cores with the DSP extension (Cortex-M4/M7/M33): the "tuned" backend.

Convolutions (one group) and fully connected layers run ``mcu_conv2d_packed_s8``, whose weights
are rearranged here, at compile time, into the order its inner loop reads them
(runtime_c/kernels/internal/gemm_s8_dsp.h says why): widened to int16 so no instruction is spent
on sign extension, four output channels interleaved so one LDM feeds four SMLADs, window taps
padded to a multiple of 4 and reordered 0, 2, 1, 3 within each group of four to match the
input column that SXTAB16 builds.

:func:`assign` marks the ops it takes (``op.attrs["backend"] = "tuned"``) for a board; the
variant table (mcu/backends/variants.py) then routes them here for generated C. The kernel reads
each output pixel's window before writing it, and a pointwise layer's pixel before writing that
pixel, so it keeps the overlap contracts of the kernels it replaces (mcu/contracts.py) and the
memory plan is the same. Program files are architecture independent, so they keep the portable
kernels for these ops (same outputs, bit for bit).

The cost is flash: the packed weights take twice the bytes of int8 weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mcu.ir import Graph, Op, Tensor

if TYPE_CHECKING:
    from mcu.boards import Board

BACKEND = "tuned"
FUNCTION = "mcu_conv2d_packed_s8"
SOURCE = "mcu_conv2d_packed_s8.c"
TAPS_MAX = 640  # MCU_CONV_PACKED_TAPS_MAX in runtime_c/include/mcu/kernels_s8.h


def padded_taps(k: int) -> int:
    return (k + 3) // 4 * 4


def pack_weights(w: np.ndarray) -> np.ndarray:
    """int8 weights (out_c, taps) in window order -> the int16 words mcu_conv2d_packed_s8 reads."""
    out_c, k = w.shape
    kp, op = padded_taps(k), padded_taps(out_c)
    full = np.zeros((op, kp), dtype=np.int16)
    full[:out_c, :k] = w
    full = full.reshape(op, kp // 4, 4)[:, :, [0, 2, 1, 3]].reshape(op // 4, 4, kp // 2, 2)
    return np.ascontiguousarray(full.transpose(0, 2, 1, 3)).reshape(-1)


def _taps(op: Op) -> int:
    w = op.inputs[1]
    return int(np.prod(w.shape[1:]))


def applies(op: Op, board: "Board") -> str | None:
    """Why the packed kernel cannot serve ``op`` on ``board`` (None: it can)."""
    if not board.dsp or board.mve:
        return "the core has no DSP extension, or has Helium (its own kernel paths)"
    if op.output.dtype != "int8" or op.attrs.get("alias") or op.attrs.get("backend"):
        return "not an int8 op of ours"
    if op.kind not in ("conv2d", "linear") or op.inputs[0].dtype != "int8":
        return "not a convolution or fully connected layer"
    if op.kind == "conv2d" and (op.attrs["groups"] != 1 or op.inputs[1].dim_order != (0, 2, 3, 1)):
        return "grouped convolution"
    if op.kind == "linear" and len(op.inputs[1].shape) != 2:
        return "weights are not a matrix"
    if padded_taps(_taps(op)) > TAPS_MAX:
        return f"window of {_taps(op)} values is over the kernel's {TAPS_MAX}"
    return None


def assign(graph: Graph, board: "Board") -> dict[str, str]:
    """Mark the ops the packed kernel serves on ``board``; returns op name -> kernel or reason."""
    report: dict[str, str] = {}
    for op in graph.ops:
        if op.kind not in ("conv2d", "linear"):
            continue
        why = applies(op, board)
        if why is None:
            op.attrs["backend"] = BACKEND
        report[op.name] = FUNCTION if why is None else why
    return report


def routed(op: Op, same_place: bool = False) -> bool:
    return op.attrs.get("backend") == BACKEND


def packed_tensor(op: Op) -> Tensor:
    """The op's packed weights (made once and kept on the op so every emission names one constant)."""
    cached = op.attrs.get("packed_weights")
    if isinstance(cached, Tensor):
        return cached
    w = op.inputs[1]
    assert w.data is not None
    data = pack_weights(np.asarray(w.data, dtype=np.int8).reshape(w.shape[0], -1))
    t = Tensor(name=f"{w.name}_packed", shape=(data.size,), dtype="int16", data=data)
    op.attrs["packed_weights"] = t
    return t


def conv_params(op: Op) -> dict[str, Any]:
    """The mcu_conv2d_s8_params of ``op`` (a fully connected layer as a 1x1 convolution over rows)."""
    from mcu.emit.kernels import _conv_params_s8, _offsets

    if op.kind == "conv2d":
        return _conv_params_s8(op)[1]
    x, w = op.inputs[:2]
    out_f, in_f = w.shape
    rows = x.numel // in_f
    one = {"kernel_h": 1, "kernel_w": 1, "stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0,
           "dilation_h": 1, "dilation_w": 1}
    return {"input": {"n": rows, "h": 1, "w": 1, "c": in_f}, "output": {"n": rows, "h": 1, "w": 1, "c": out_f},
            **one, "groups": 1, **_offsets(op, "input_offset", "output_offset", "act_min", "act_max")}


def emit(op: Op, ref: Any) -> Any:
    from mcu.emit.kernels import KernelCall, _quant_locals

    x, _w, b = op.inputs[:3]
    packed = packed_tensor(op)
    return KernelCall(FUNCTION, ["&ctx", "&params", "&quant", ref(x), ref(packed), ref(b), ref(op.output)],
                      [SOURCE], "mcu_conv2d_s8_params", conv_params(op), locals=_quant_locals(op, ref))
