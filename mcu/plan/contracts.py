"""Overlap contracts: where a kernel's output may share bytes with its input.

Every kernel writes its output in memory order, unit by unit (an element for
elementwise kernels, an NHWC pixel with all its channels for window kernels),
and reads the inputs of a unit before it writes that unit. For such a kernel,
placing the output ``d`` bytes after the input start (``d`` may be negative)
is safe exactly when no write lands on input bytes that a later read still
needs. With ``m(q)`` the first input unit read for output unit ``q``, ``Bi``
and ``Bo`` the bytes per input and output unit, writing units ``0..q`` ends at
``d + (q + 1) * Bo``, and reads for units ``>= q`` start at ``m(q) * Bi``
(``m`` never decreases), so the condition is

    d <= D = min over q of (m(q) * Bi - (q + 1) * Bo)     (window kernels)
    d <= D = min over q of ((q + 1) * (Bi - Bo))          (elementwise: unit q reads input unit q)

where an elementwise kernel finishes reading unit q before writing it, so its
bound uses the reads of unit q + 1; a window kernel writes a pixel channel by
channel while still reading that pixel's window, so its bound uses unit q's
own first read. The kernels additionally refuse any overlap
in which the output starts after the input (a cheap runtime sanity check), so
contracts are capped at ``D <= 0``. A contract only matters when the input
dies at that op; the planner asks for it, the verifier re-derives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mcu.ir import DTYPE_BYTES, Op, Tensor

WINDOW_KINDS = {"conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d"}
ELEMENTWISE_KINDS = {"clamp", "sigmoid", "tanh", "hardswish", "lut", "requantize", "batch_norm", "quantize",
                     "dequantize", "unary", "layer_norm",
                     "group_norm", "prelu", "log_softmax", "rms_norm"}  # normalisation and activations
BINARY_KINDS = {"add", "sub", "mul", "div", "maximum", "minimum"}
S16_APART = {"conv2d", "depthwise_conv2d", "linear", "max_pool2d", "avg_pool2d"}  # (w8a16's kernels whose output overlaps no input)


Interval = tuple["int | None", "int | None"]  # allowed output-minus-input offsets, ends included; None: unbounded


@dataclass(frozen=True)
class Overlap:
    """Where the output may start relative to input ``input_index``: any delta in one of ``intervals``."""

    input_index: int
    intervals: tuple[Interval, ...]
    kind: str  # "window" | "elementwise" | "inplace" | "pixel-buffer"

    @property
    def max_delta(self) -> int:
        """The largest delta of the unbounded-below interval (the forward contract)."""
        return max(hi for lo, hi in self.intervals if lo is None and hi is not None)


def allows(intervals: tuple[Interval, ...], delta: int) -> bool:
    return any((lo is None or delta >= lo) and (hi is None or delta <= hi) for lo, hi in intervals)


def forward(d: int) -> Interval:
    """Window kernels refuse an output starting at or after their input (a cheap runtime check)."""
    return (None, min(d, -1))


def depthwise_inplace_ok(op: Op) -> bool:
    """The in-place depthwise variant applies: int8, stride 1, dilation 1, no channel multiplier, same size."""
    a = op.attrs
    x, out = op.inputs[0], op.output
    return (op.kind == "depthwise_conv2d" and out.dtype == "int8" and op.attrs.get("weight_bits") != 4
            and not op.attrs.get("palette_bits") and tuple(a["stride"]) == (1, 1)
            and tuple(a["dilation"]) == (1, 1) and a.get("ch_mult", 1) == 1 and x.shape == out.shape
            and a["padding"][0] < op.inputs[1].shape[2] and a["padding"][1] < op.inputs[1].shape[3])


def pointwise_ok(op: Op) -> bool:
    """The pixel-buffer 1x1 variant applies: int8 1x1 convolution, stride 1, no padding, one group."""
    a = op.attrs
    if op.kind != "conv2d" or op.output.dtype != "int8" or a.get("weight_bits") == 4 or a.get("palette_bits"):
        return False  # (the s4 and look-up-table convolutions have no pixel-buffer form)
    w = op.inputs[1]
    return (w.shape[2], w.shape[3]) == (1, 1) and tuple(a["stride"]) == (1, 1) and tuple(a["padding"]) == (0, 0) \
        and a["groups"] == 1


def pointwise_intervals(x: Tensor, out: Tensor) -> tuple[Interval, ...]:
    """mcu_conv2d_1x1_s8: forward up to min(Bi-Bo, P(Bi-Bo)), backward from max(0, (P-1)(Bi-Bo))."""
    pixels = x.shape[0] * x.shape[2] * x.shape[3]
    bi, bo = x.shape[1], out.shape[1]
    fwd = min(bi - bo, pixels * (bi - bo))
    bwd = max(0, (pixels - 1) * (bi - bo))
    return ((None, fwd), (bwd, None))


def _first_tap(o: np.ndarray, stride: int, pad: int, kernel: int, dilation: int) -> np.ndarray:
    """Index of the first in-bounds input row/column read by output rows/columns ``o``."""
    start = o * stride - pad
    # the first tap k with start + k*dilation >= 0
    k = np.where(start < 0, -(start // dilation), 0)
    k = np.minimum(k, kernel - 1)
    return np.maximum(start + k * dilation, 0)


def window_max_delta(x: Tensor, out: Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                     padding: tuple[int, int], dilation: tuple[int, int]) -> int:
    n, c_in, h, w = x.shape
    _, c_out, oh, ow = out.shape
    bi = c_in * DTYPE_BYTES[x.dtype]
    bo = c_out * DTYPE_BYTES[out.dtype]
    rows = _first_tap(np.arange(oh), stride[0], padding[0], kernel[0], dilation[0])
    cols = _first_tap(np.arange(ow), stride[1], padding[1], kernel[1], dilation[1])
    m = (np.arange(n)[:, None, None] * h * w + rows[None, :, None] * w + cols[None, None, :]).reshape(-1)
    q = np.arange(m.size)
    # While unit q is being written (channel by channel) its own reads are not finished either:
    # the bytes still needed start at the lowest first-read of any unit >= q.
    m_suffix = np.minimum.accumulate(m[::-1])[::-1]
    return int(np.min(m_suffix.astype(np.int64) * bi - (q + 1).astype(np.int64) * bo))


def elementwise_max_delta(x: Tensor, out: Tensor) -> int:
    bi, bo = DTYPE_BYTES[x.dtype], DTYPE_BYTES[out.dtype]
    if x.numel != out.numel:
        return -out.nbytes
    return min(bi - bo, out.numel * (bi - bo))


# A look-up-table convolution whose decoded weights take at most this many bytes decodes them all at once
# into its scratch and runs the int8 convolution (several times faster than a channel at a time).
PALETTE_WHOLE_BYTES = 4096


# mcu_conv2d_s4 widens its weights into the int8 packed kernel's stream when its scratch holds it: int16 weights,
# four times the 4-bit bytes, widened once per call. Only where that pays: at least S4_STREAM_PIXELS output pixels
# share each widened weight (the widening costs a few instructions a weight, the packed loop under one a MAC),
# and within S4_STREAM_MAX bytes of scratch.
S4_STREAM_MAX = 36864
S4_STREAM_PIXELS = 4
S4_TAPS_MAX = 640  # MCU_CONV_PACKED_TAPS_MAX


def s4_stream_bytes(op: Op) -> int:
    """The scratch mcu_conv2d_s4 runs the packed kernel with (mcu_conv2d_s4_get_buffer_size), 0: it runs its own
    loops."""
    w, out = op.inputs[1], op.output
    if op.kind != "conv2d" or op.attrs["groups"] != 1 or op.attrs.get("s4_stream") is False:
        return 0  # (s4_stream False: the build keeps the packed kernel's code out, --compact-weights)
    c_out, c_in, kh, kw = w.shape
    kp = (c_in * kh * kw + 3) // 4 * 4
    pixels = out.shape[0] * out.shape[2] * out.shape[3]
    if max(kh, kw, c_in, kp) > S4_TAPS_MAX or pixels < S4_STREAM_PIXELS:
        return 0
    size = 4 * (4 + (c_out + 3) // 4 * (4 + 2 * kp + 16))
    return size if size <= S4_STREAM_MAX else 0


def scratch_bytes(op: Op) -> int:
    """Scratch the op's kernel needs (the ``_get_buffer_size`` of the variant it may run)."""
    if op.attrs.get("palette_bits") and op.output.dtype == "int16":  # the whole tensor decoded, for the 16x8 kernel
        w = op.inputs[1]
        if op.kind == "linear":  # as many rows as PALETTE_WHOLE_BYTES holds (at least one) a pass
            row = w.numel // w.shape[0]
            return min(w.numel, max(row, PALETTE_WHOLE_BYTES // row * row))
        if op.kind != "conv2d" or (w.shape[2], w.shape[3]) == (1, 1):
            return w.numel
        return (w.numel + 3) // 4 * 4 + 2 * w.shape[1] * w.shape[2] * w.shape[3]  # and its window column
    if op.kind == "conv2d" and op.output.dtype == "int16":  # the 16x8 convolution's window as one column
        w = op.inputs[1]
        return 0 if (w.shape[2], w.shape[3]) == (1, 1) else 2 * w.shape[1] * w.shape[2] * w.shape[3]
    if op.attrs.get("weight_bits") == 4:  # the s4 depthwise widens its weights to int8 there
        w = op.inputs[1]
        if op.kind == "conv2d":
            return s4_stream_bytes(op)
        return w.numel if op.kind == "depthwise_conv2d" else 0
    if op.attrs.get("palette_bits"):  # the look-up-table kernels decode weights there
        w = op.inputs[1]
        whole = op.kind == "depthwise_conv2d" or (op.kind == "conv2d" and w.numel <= PALETTE_WHOLE_BYTES)
        if whole or op.kind == "linear":  # (the linear kernel decodes one row at a time)
            return w.numel if whole else w.numel // w.shape[0]
        return min(w.numel, 2 * (w.numel // w.shape[0]))  # the convolution: two channels a pass
    if pointwise_ok(op):
        return op.output.shape[1]
    if depthwise_inplace_ok(op):
        x = op.inputs[0]
        return (op.attrs["padding"][0] + 1) * x.shape[3] * x.shape[1]
    return 0


def overlap_contracts(op: Op) -> list[Overlap]:
    """The overlaps this op's kernel allows between its output and each input (empty: none)."""
    if op.attrs.get("alias") or not op.inputs or op.attrs.get("no_overlap"):
        return []  # set by a backend whose kernels promise nothing about overlap (CMSIS-NN's)
    out = op.output
    x = op.inputs[0]
    if x.is_constant:
        return []
    if out.dtype == "int16" and op.kind in S16_APART:
        return []  # the 16x8 convolution and linear kernels overlap nothing
    if pointwise_ok(op):
        return [Overlap(0, pointwise_intervals(x, out), "pixel-buffer")]
    if op.kind == "conv2d" and op.attrs.get("palette_bits") and scratch_bytes(op) < op.inputs[1].numel:
        return []  # mcu_conv2d_lut_s8 a channel at a time writes over the whole output per channel
    if op.kind in WINDOW_KINDS and len(x.shape) == 4:
        if op.kind in ("conv2d", "depthwise_conv2d"):
            w = op.inputs[1]
            kernel = (w.shape[2], w.shape[3])
        else:
            kernel = tuple(op.attrs["kernel"])
        d = window_max_delta(x, out, kernel, tuple(op.attrs["stride"]), tuple(op.attrs["padding"]),
                             tuple(op.attrs["dilation"]))
        if depthwise_inplace_ok(op):
            return [Overlap(0, (forward(d), (0, 0)), "inplace")]
        return [Overlap(0, (forward(d),), "window")]
    if op.kind == "custom":
        # A user kernel overlaps nothing unless its registration says it may write over its first input.
        reg = op.attrs["custom"]
        return [Overlap(0, ((0, 0),), "custom in-place")] if reg.in_place and x.nbytes == out.nbytes else []
    if op.kind in ELEMENTWISE_KINDS or (op.kind == "softmax" and x.dtype == out.dtype):
        # The kernels accept exact aliasing only (a cheap check they can make); that is inside the bound.
        if x.nbytes == out.nbytes and elementwise_max_delta(x, out) >= 0:
            return [Overlap(0, ((0, 0),), "elementwise")]
        return []
    if op.kind in BINARY_KINDS:
        # an operand with the output's shape and layout may be overwritten in place (exactly)
        return [Overlap(i, ((0, 0),), "elementwise") for i, t in enumerate(op.inputs)
                if not t.is_constant and t.shape == out.shape and t.dim_order == out.dim_order
                and t.dtype == out.dtype]
    return []
