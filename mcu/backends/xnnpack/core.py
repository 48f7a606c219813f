"""XNNPACK as a delegate backend: desktop (x86-64) and phone-class (arm64) CPUs running Linux.

The support table is what Debian's ``libxnnpack-dev`` (snapshot 2022-02-16) does in its subgraph API
for the IR's ops: fp32 and int8 (qint8 activations, qcint8 per-channel convolution weights with
qcint32 bias) convolutions, depthwise convolutions, per-tensor int8 and fp32 fully connected
layers, add, mul, pooling, global average pooling, clamps, fp32 sigmoid / hardswish / softmax.
That version has no per-channel int8 fully connected, no int8 softmax, no tanh, no transpose and no
concatenate: those ops stay with the next backend, and the partition report says why.

:meth:`XnnpackBackend.preprocess` writes the payload that runtime_c/backends/xnnpack/mcu_xnnpack.c
reads (version 1, little-endian, every field 4 bytes):

    header   "XNNP", u32 version, u32 total size, u32 CRC-32 (zlib's) of bytes [16, size),
             u32 n_values, u32 n_nodes, u32 n_inputs, u32 n_outputs
    value    u32 xnn_datatype, u32 rank, u32 dims[rank] (NHWC for 4-D), u32 boundary index
             (inputs, then outputs; 0xFFFFFFFF inside the partition), i32 zero point, f32 scale,
             u32 channel dim, u32 n_scales, f32 scales[n_scales], u32 data offset, u32 data bytes
    node     u32 code, u32 n_params, u32 params[], f32 output min, f32 output max, u32 n_ids, u32 ids[]
    data     constant tensors in the value's layout, each at a 16-byte aligned offset
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from mcu.backends.base import Backend, Constraint, Context, DelegateRuntime, Partition, Rule
from mcu.ir import CHANNELS_LAST, Op, Tensor

MAGIC = b"XNNP"
VERSION = 1
NONE = 0xFFFFFFFF

# enum xnn_datatype of the 2022 header
FP32, QINT8, QINT32, QCINT8, QCINT32 = 1, 3, 5, 6, 7

CONV2D, DEPTHWISE, FULLY_CONNECTED, ADD, MULTIPLY, MAX_POOL, AVG_POOL, GLOBAL_AVG_POOL, CLAMP, SIGMOID, \
    HARDSWISH, SOFTMAX = range(1, 13)


def _nhwc_ok(t: Tensor) -> bool:
    """A 4-D activation whose bytes are NHWC (channels-last, or 1x1 spatial), or any 2-D one."""
    if len(t.shape) == 2:
        return True
    if len(t.shape) != 4:
        return False
    return t.dim_order == CHANNELS_LAST or t.shape[2] * t.shape[3] == 1


def _activations_nhwc(op: Op) -> bool:
    return all(_nhwc_ok(t) for t in (*op.inputs[:1], *op.outputs) if not t.is_constant)


def _weights_constant(op: Op) -> bool:
    return all(t.is_constant for t in op.inputs[1:3])


def _symmetric_weights(op: Op) -> bool:
    w = op.inputs[1] if len(op.inputs) > 1 else None
    return w is None or w.quant is None or all(z == 0 for z in w.quant.zero_point)


def _no_ceil(op: Op) -> bool:
    return not op.attrs.get("ceil_mode", False)


def _avg_pool_plain(op: Op) -> bool:
    return tuple(op.attrs.get("padding", (0, 0))) == (0, 0) and not op.attrs.get("divisor_override")


def _same_shapes(op: Op) -> bool:
    a = op.inputs[0]
    return all(not t.is_constant and t.shape == a.shape and t.dim_order == a.dim_order for t in op.inputs) \
        and op.outputs[0].shape == a.shape and _nhwc_ok(a)


def _softmax_last(op: Op) -> bool:
    t = op.inputs[0]
    return op.attrs.get("axis") == len(t.shape) - 1 and t.is_contiguous_layout()


def _elementwise(op: Op) -> bool:
    return op.inputs[0].is_contiguous_layout() or _nhwc_ok(op.inputs[0])


NHWC = Constraint("XNNPACK takes NHWC (channels-last) activations only", _activations_nhwc)
CONST_W = Constraint("XNNPACK needs constant weights and bias", _weights_constant)
SYMMETRIC = Constraint("XNNPACK needs int8 weights with zero point 0", _symmetric_weights)
NO_CEIL = Constraint("XNNPACK pooling has no ceil_mode", _no_ceil)
AVG_PLAIN = Constraint("XNNPACK average pooling here takes no padding and no divisor override", _avg_pool_plain)
SAME = Constraint("XNNPACK binary ops here take two activations of one shape and layout (no broadcast)",
                  _same_shapes)
SOFTMAX_LAST = Constraint("XNNPACK softmax runs over the innermost dimension only", _softmax_last)
ELEMENTWISE = Constraint("XNNPACK takes row-major or NHWC tensors", _elementwise)

BOTH = ("float32", "int8")


@dataclass
class _Value:
    dtype: int
    dims: tuple[int, ...]
    external: int = NONE
    zero_point: int = 0
    scale: float = 1.0
    channel_dim: int = 0
    scales: tuple[float, ...] = ()
    data: bytes = b""


@dataclass
class _Node:
    code: int
    params: tuple[int, ...]
    lo: float
    hi: float
    ids: tuple[int, ...]


@dataclass
class _Builder:
    """Values and nodes of one partition, in the order the C side defines them."""

    partition: Partition
    values: list[_Value] = field(default_factory=list)
    nodes: list[_Node] = field(default_factory=list)
    ids: dict[int, int] = field(default_factory=dict)

    def activation(self, t: Tensor) -> int:
        if id(t) in self.ids:
            return self.ids[id(t)]
        boundary = [*self.partition.inputs, *self.partition.outputs]
        external = next((i for i, b in enumerate(boundary) if b is t), NONE)
        if t.dtype == "float32":
            v = _Value(FP32, _dims(t), external)
        elif t.dtype == "int8" and t.quant is not None and t.quant.per_tensor:
            v = _Value(QINT8, _dims(t), external, int(t.quant.zero_point[0]), float(t.quant.scale[0]))
        else:
            raise ValueError(f"XNNPACK payload: tensor {t.name} ({t.dtype}) has no XNNPACK datatype")
        return self._add(t, v)

    def constant(self, t: Tensor, dims: tuple[int, ...], value: _Value) -> int:
        value.dims = dims
        value.data = np.ascontiguousarray(t.data).tobytes()
        return self._add(t, value)

    def _add(self, t: Tensor, v: _Value) -> int:
        self.values.append(v)
        self.ids[id(t)] = len(self.values) - 1
        return len(self.values) - 1

    def node(self, code: int, params: tuple[int, ...], lo: float, hi: float, ids: tuple[int, ...]) -> None:
        self.nodes.append(_Node(code, tuple(int(p) for p in params), lo, hi, ids))


def _dims(t: Tensor) -> tuple[int, ...]:
    if len(t.shape) == 4:
        n, c, h, w = t.shape
        return (n, h, w, c)
    return tuple(t.shape)


def _range(op: Op) -> tuple[float, float]:
    """The fused activation as XNNPACK's float output range (infinite when unclamped)."""
    out = op.outputs[0]
    if out.dtype == "int8":
        assert out.quant is not None
        s, z = float(out.quant.scale[0]), int(out.quant.zero_point[0])
        lo_q, hi_q = op.attrs.get("act_min", -128), op.attrs.get("act_max", 127)
        lo = -math.inf if lo_q <= -128 else (lo_q - z) * s
        hi = math.inf if hi_q >= 127 else (hi_q - z) * s
        return lo, hi
    act = op.attrs.get("act") if op.kind != "clamp" else (op.attrs.get("min"), op.attrs.get("max"))
    if not act:
        return -math.inf, math.inf
    lo, hi = act
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


def _weights(b: _Builder, op: Op, channel_dim: int, dims: tuple[int, ...]) -> tuple[int, int]:
    """Define the filter (physical layout ``dims``) and the bias; returns their value ids."""
    w, bias = op.inputs[1], (op.inputs[2] if len(op.inputs) > 2 else None)
    x = op.inputs[0]
    if w.dtype == "float32":
        wid = b.constant(w, dims, _Value(FP32, dims))
        bid = NONE if bias is None else b.constant(bias, (dims[channel_dim],), _Value(FP32, ()))
        return wid, bid
    assert w.quant is not None and x.quant is not None
    out_ch = dims[channel_dim]
    w_scales = np.broadcast_to(np.asarray(w.quant.scale, dtype=np.float64), (out_ch,)) if len(w.quant.scale) == 1 \
        else np.asarray(w.quant.scale, dtype=np.float64)
    x_scale = float(x.quant.scale[0])
    if op.kind == "linear":  # that XNNPACK version: per-tensor int8 fully connected only
        wid = b.constant(w, dims, _Value(QINT8, dims, scale=float(w_scales[0])))
        bid = NONE if bias is None else b.constant(bias, (out_ch,), _Value(QINT32, (), scale=x_scale * float(w_scales[0])))
        return wid, bid
    wid = b.constant(w, dims, _Value(QCINT8, dims, channel_dim=channel_dim,
                                     scales=tuple(float(s) for s in w_scales.astype(np.float32))))
    bid = NONE if bias is None else b.constant(
        bias, (out_ch,), _Value(QCINT32, (), channel_dim=0,
                                scales=tuple(float(s) for s in (x_scale * w_scales).astype(np.float32))))
    return wid, bid


def _window(op: Op) -> tuple[int, ...]:
    """padding top, right, bottom, left."""
    ph, pw = op.attrs.get("padding", (0, 0))
    return (ph, pw, ph, pw)


def _conv_window(op: Op) -> tuple[int, ...]:
    """padding top, right, bottom, left of a convolution: the bottom/right ones implied by the output size,
    as our kernels read them (a folded F.pad makes them differ from the top/left ones)."""
    (ph, pw), (sh, sw) = op.attrs.get("padding", (0, 0)), op.attrs["stride"]
    dh, dw = op.attrs.get("dilation", (1, 1))
    kh, kw = op.inputs[1].shape[2:]
    (h, w), (oh, ow) = op.inputs[0].shape[2:], op.outputs[0].shape[2:]
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - ph)
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pw)
    return (ph, right, bottom, pw)


def _define(b: _Builder, op: Op) -> None:
    x = op.inputs[0]
    lo, hi = _range(op)
    if op.kind in ("conv2d", "depthwise_conv2d"):
        out = op.outputs[0]
        kh, kw = op.inputs[1].shape[2:]
        sh, sw = op.attrs["stride"]
        dh, dw = op.attrs.get("dilation", (1, 1))
        groups = int(op.attrs.get("groups", 1))
        cin, cout = x.shape[1], out.shape[1]
        if op.kind == "depthwise_conv2d":  # weights [1, KH, KW, C*M]
            wid, bid = _weights(b, op, 3, (1, kh, kw, cout))
            b.node(DEPTHWISE, (*_conv_window(op), kh, kw, sh, sw, dh, dw, cout // cin, cin), lo, hi,
                   (b.activation(x), wid, bid, b.activation(out)))
        else:  # weights [O, KH, KW, I/groups]
            wid, bid = _weights(b, op, 0, (cout, kh, kw, cin // groups))
            b.node(CONV2D, (*_conv_window(op), kh, kw, sh, sw, dh, dw, groups, cin // groups, cout // groups), lo, hi,
                   (b.activation(x), wid, bid, b.activation(out)))
    elif op.kind == "linear":
        w = op.inputs[1]
        wid, bid = _weights(b, op, 0, tuple(w.physical_shape))
        b.node(FULLY_CONNECTED, (), lo, hi, (b.activation(x), wid, bid, b.activation(op.outputs[0])))
    elif op.kind in ("add", "mul"):
        b.node(ADD if op.kind == "add" else MULTIPLY, (), lo, hi,
               (b.activation(op.inputs[0]), b.activation(op.inputs[1]), b.activation(op.outputs[0])))
    elif op.kind == "max_pool2d":
        kh, kw = op.attrs["kernel"]
        sh, sw = op.attrs["stride"]
        dh, dw = op.attrs.get("dilation", (1, 1))
        b.node(MAX_POOL, (*_window(op), kh, kw, sh, sw, dh, dw), lo, hi,
               (b.activation(x), b.activation(op.outputs[0])))
    elif op.kind == "avg_pool2d":
        kh, kw = op.attrs["kernel"]
        sh, sw = op.attrs["stride"]
        b.node(AVG_POOL, (*_window(op), kh, kw, sh, sw), lo, hi, (b.activation(x), b.activation(op.outputs[0])))
    elif op.kind == "mean_hw":
        b.node(GLOBAL_AVG_POOL, (), lo, hi, (b.activation(x), b.activation(op.outputs[0])))
    elif op.kind == "clamp":
        b.node(CLAMP, (), lo, hi, (b.activation(x), b.activation(op.outputs[0])))
    else:
        code = {"sigmoid": SIGMOID, "hardswish": HARDSWISH, "softmax": SOFTMAX}[op.kind]
        b.node(code, (), -math.inf, math.inf, (b.activation(x), b.activation(op.outputs[0])))


def _serialise(b: _Builder, n_inputs: int, n_outputs: int) -> bytes:
    u32 = struct.Struct("<I")
    body = bytearray()
    data = bytearray()
    data_fixups: list[tuple[int, int]] = []  # (position of the offset field in body, offset in data)
    for v in b.values:
        body += struct.pack(f"<II{len(v.dims)}IIifII", v.dtype, len(v.dims), *v.dims, v.external, v.zero_point,
                            v.scale, v.channel_dim, len(v.scales))
        body += struct.pack(f"<{len(v.scales)}f", *v.scales)
        if v.data:
            while len(data) % 16:
                data.append(0)
            data_fixups.append((len(body), len(data)))
            data += v.data
        body += struct.pack("<II", 0, len(v.data))
    for n in b.nodes:
        body += struct.pack(f"<II{len(n.params)}IffI{len(n.ids)}I", n.code, len(n.params), *n.params, n.lo, n.hi,
                            len(n.ids), *n.ids)
    header = 32
    data_start = header + len(body)
    data_start += (-data_start) % 16
    for at, off in data_fixups:
        body[at:at + 4] = u32.pack(data_start + off)
    tail = bytes((data_start - header - len(body))) + bytes(data) if data else b""
    counts = struct.pack("<IIII", len(b.values), len(b.nodes), n_inputs, n_outputs)
    total = header + len(body) + len(tail)
    rest = counts + bytes(body) + tail
    return MAGIC + struct.pack("<III", VERSION, total, zlib.crc32(rest)) + rest


# The C runtime (runtime_c/backends/xnnpack/), built against Debian's libxnnpack-dev (2022-02-16) with
# libpthreadpool (libXNNPACK.so pulls in libcpuinfo.so.0 itself).
RUNTIME = DelegateRuntime("mcu_xnnpack_backend", "mcu/delegate_xnnpack.h", ("backends/xnnpack/mcu_xnnpack.c",),
                          ("-lXNNPACK", "-lpthreadpool"))


class XnnpackBackend(Backend):
    id = "xnnpack"
    version = VERSION
    delegate = True
    runtime = RUNTIME
    rules = (
        Rule("conv2d", BOTH, "any", (NHWC, CONST_W, SYMMETRIC)),
        Rule("depthwise_conv2d", ("int8",), "any", (NHWC, CONST_W, SYMMETRIC)),
        Rule("linear", ("float32",), "any", (CONST_W,)),
        Rule("linear", ("int8",), "per-tensor", (CONST_W, SYMMETRIC)),
        Rule("add", BOTH, "any", (SAME,)),
        Rule("mul", BOTH, "any", (SAME,)),
        Rule("max_pool2d", BOTH, "any", (NHWC, NO_CEIL)),
        Rule("avg_pool2d", ("float32",), "any", (NHWC, NO_CEIL, AVG_PLAIN)),
        Rule("mean_hw", BOTH, "any", (NHWC,)),
        Rule("clamp", BOTH, "any", (ELEMENTWISE,)),
        Rule("sigmoid", ("float32",), "any", (ELEMENTWISE,)),
        Rule("hardswish", ("float32",), "any", (ELEMENTWISE,)),
        Rule("softmax", ("float32",), "any", (SOFTMAX_LAST,)),
    )

    def unavailable(self, ctx: Context) -> str | None:
        if not ctx.board.is_linux:
            return f"XNNPACK runs on Linux boards (host, arm64-linux), not on {ctx.board.name}"
        return None

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.kind == "linear" and op.outputs[0].dtype == "int8" and op.inputs[1].quant is not None \
                and len(set(op.inputs[1].quant.scale)) > 1:
            return "per-channel int8 fully connected is not in XNNPACK 2022-02-16"
        if op.kind == "softmax" and op.outputs[0].dtype == "int8":
            return "int8 softmax is not in XNNPACK 2022-02-16"
        if op.kind in ("permute", "layout", "concat"):
            return f"{op.kind} (transpose / concatenate) is not in XNNPACK 2022-02-16's subgraph API"
        return super().refuse(op, ctx)

    def preprocess(self, partition: Partition, ctx: Context) -> bytes:
        b = _Builder(partition)
        for t in partition.inputs:  # boundary values first: their ids do not depend on op order
            b.activation(t)
        for op in partition.ops:
            _define(b, op)
        for t in partition.outputs:
            b.activation(t)
        return _serialise(b, len(partition.inputs), len(partition.outputs))
