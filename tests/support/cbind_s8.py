"""ctypes bindings to the int8 C kernels (runtime_c/include/mcu/kernels_s8.h), for tests.

The structs mirror the header field for field; ``check_layout`` compares their
sizes with what the header implies. ``call_*`` helpers build the structs from
the same keyword dicts that the references in mcu.reference take, run the C kernel on
fresh output buffers and return (status, output).
"""

from __future__ import annotations

import ctypes
import functools
from ctypes import POINTER, c_float, c_int, c_int32, c_void_p

import numpy as np

from cbind import MCU_MAX_DIMS, Dims, Shape4, dims, ptr

_P = c_void_p


class Context(ctypes.Structure):
    _fields_ = [("buf", c_void_p), ("size", c_int32)]


class PerChannelQuant(ctypes.Structure):
    _fields_ = [("multiplier", POINTER(c_int32)), ("shift", POINTER(c_int32))]


class Conv2dS8Params(ctypes.Structure):
    _fields_ = [
        ("input", Shape4), ("output", Shape4),
        ("kernel_h", c_int32), ("kernel_w", c_int32),
        ("stride_h", c_int32), ("stride_w", c_int32),
        ("pad_top", c_int32), ("pad_left", c_int32),
        ("dilation_h", c_int32), ("dilation_w", c_int32),
        ("groups", c_int32),
        ("input_offset", c_int32), ("output_offset", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class DepthwiseConv2dS8Params(ctypes.Structure):
    _fields_ = [
        ("input", Shape4), ("output", Shape4),
        ("ch_mult", c_int32),
        ("kernel_h", c_int32), ("kernel_w", c_int32),
        ("stride_h", c_int32), ("stride_w", c_int32),
        ("pad_top", c_int32), ("pad_left", c_int32),
        ("dilation_h", c_int32), ("dilation_w", c_int32),
        ("input_offset", c_int32), ("output_offset", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class LinearS8Params(ctypes.Structure):
    _fields_ = [
        ("batch", c_int32), ("in_features", c_int32), ("out_features", c_int32),
        ("input_offset", c_int32), ("output_offset", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class BinaryS8Params(ctypes.Structure):
    _fields_ = [
        ("rank", c_int32),
        ("out_shape", Dims), ("a_strides", Dims), ("b_strides", Dims),
        ("a_offset", c_int32), ("b_offset", c_int32),
        ("a_multiplier", c_int32), ("a_shift", c_int32),
        ("b_multiplier", c_int32), ("b_shift", c_int32),
        ("left_shift", c_int32),
        ("out_multiplier", c_int32), ("out_shift", c_int32),
        ("output_offset", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class Pool2dS8Params(ctypes.Structure):
    _fields_ = [
        ("input", Shape4), ("output", Shape4),
        ("kernel_h", c_int32), ("kernel_w", c_int32),
        ("stride_h", c_int32), ("stride_w", c_int32),
        ("pad_top", c_int32), ("pad_left", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class MeanHwS8Params(ctypes.Structure):
    _fields_ = [
        ("input", Shape4),
        ("input_offset", c_int32),
        ("multiplier", c_int32), ("shift", c_int32),
        ("output_offset", c_int32),
        ("act_min", c_int32), ("act_max", c_int32),
    ]


class SoftmaxS8Params(ctypes.Structure):
    _fields_ = [
        ("outer", c_int32), ("axis", c_int32), ("inner", c_int32),
        ("input_multiplier", c_int32), ("input_left_shift", c_int32), ("diff_min", c_int32),
    ]


class SoftmaxMaskedS8Params(ctypes.Structure):
    _fields_ = [
        ("outer", c_int32), ("axis", c_int32), ("inner", c_int32),
        ("input_multiplier", c_int32), ("input_left_shift", c_int32), ("diff_min", c_int32), ("mask_rows", c_int32),
    ]


_EXPECTED_SIZES = {
    Context: 16,  # pointer + int32, padded to 8 on 64-bit hosts
    PerChannelQuant: 16,
    Conv2dS8Params: 2 * 16 + 13 * 4,
    DepthwiseConv2dS8Params: 2 * 16 + 13 * 4,
    LinearS8Params: 7 * 4,
    BinaryS8Params: 4 + 3 * 4 * MCU_MAX_DIMS + 12 * 4,
    Pool2dS8Params: 2 * 16 + 8 * 4,
    MeanHwS8Params: 16 + 6 * 4,
    SoftmaxS8Params: 6 * 4,
}

_CP = POINTER(Context)
_QP = POINTER(PerChannelQuant)

_SIGNATURES = {
    "mcu_conv2d_s8": ([_CP, POINTER(Conv2dS8Params), _QP, _P, _P, _P, _P], c_int),
    "mcu_conv2d_s8_get_buffer_size": ([POINTER(Conv2dS8Params)], c_int32),
    "mcu_conv2d_packed_s8": ([_CP, POINTER(Conv2dS8Params), _P, _P, _P], c_int),
    "mcu_depthwise_conv2d_s8": ([_CP, POINTER(DepthwiseConv2dS8Params), _QP, _P, _P, _P, _P], c_int),
    "mcu_depthwise_conv2d_s8_get_buffer_size": ([POINTER(DepthwiseConv2dS8Params)], c_int32),
    "mcu_linear_s8": ([_CP, POINTER(LinearS8Params), _QP, _P, _P, _P, _P], c_int),
    "mcu_linear_s8_get_buffer_size": ([POINTER(LinearS8Params)], c_int32),
    "mcu_add_s8": ([POINTER(BinaryS8Params), _P, _P, _P], c_int),
    "mcu_sub_s8": ([POINTER(BinaryS8Params), _P, _P, _P], c_int),
    "mcu_mul_s8": ([POINTER(BinaryS8Params), _P, _P, _P], c_int),
    "mcu_max_pool2d_s8": ([POINTER(Pool2dS8Params), _P, _P], c_int),
    "mcu_max_pool1d_s8": ([POINTER(Pool2dS8Params), _P, _P], c_int),
    "mcu_transpose_s8": ([c_int32, c_int32, c_int32, _P, _P], c_int),
    "mcu_avg_pool2d_s8": ([POINTER(Pool2dS8Params), _P, _P], c_int),
    "mcu_mean_hw_s8": ([POINTER(MeanHwS8Params), _P, _P], c_int),
    "mcu_softmax_s8": ([POINTER(SoftmaxS8Params), _P, _P], c_int),
    "mcu_softmax_masked_s8": ([POINTER(SoftmaxMaskedS8Params), _P, _P, _P], c_int),
    "mcu_lut_s8": ([c_int32, _P, _P, _P], c_int),
    "mcu_requantize_s8": ([c_int32, c_int32, c_int32, c_int32, c_int32, c_int32, c_int32, _P, _P], c_int),
    "mcu_clamp_s8": ([c_int32, c_int32, c_int32, _P, _P], c_int),
    "mcu_quantize_f32_s8": ([c_int32, c_float, c_int32, _P, _P], c_int),
    "mcu_dequantize_s8_f32": ([c_int32, c_float, c_int32, _P, _P], c_int),
}


def check_layout() -> None:
    for struct, size in _EXPECTED_SIZES.items():
        assert ctypes.sizeof(struct) == size, (struct.__name__, ctypes.sizeof(struct), size)


@functools.cache
def lib() -> ctypes.CDLL:
    """The host build of the runtime, with argument types set for every int8 kernel."""
    import mcu._native

    handle = ctypes.CDLL(mcu._native.__file__)
    for name, (argtypes, restype) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return handle


def s8(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.int8))


def i32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.int32))


class Quant:
    """An mcu_per_channel_quant that keeps its arrays alive."""

    def __init__(self, multiplier, shift, channels: int):
        self.m = i32(np.broadcast_to(np.asarray(multiplier, dtype=np.int64), (channels,)))
        self.s = i32(np.broadcast_to(np.asarray(shift, dtype=np.int64), (channels,)))
        self.struct = PerChannelQuant(self.m.ctypes.data_as(POINTER(c_int32)),
                                      self.s.ctypes.data_as(POINTER(c_int32)))

    def ref(self):
        return self.m, self.s


def _fields(struct_cls, params: dict):
    out = {}
    for name, ftype in struct_cls._fields_:
        if name not in params:
            continue
        v = params[name]
        if ftype is Shape4:
            v = Shape4(*[int(t) for t in v])
        elif ftype is Dims:
            v = dims(v)
        else:
            v = int(v)
        out[name] = v
    return struct_cls(**out)


def conv2d(x, w, bias, quant: Quant, params: dict, ctx=None):
    p = _fields(Conv2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    st = lib().mcu_conv2d_s8(ctx, ctypes.byref(p), ctypes.byref(quant.struct), ptr(x), ptr(w), ptr(bias), ptr(out))
    return st, out


def conv2d_packed(x, w, bias, quant: Quant, params: dict, ctx=None, stream=None):
    """mcu_conv2d_packed_s8 with ``w`` (OHWI int8), ``bias`` and ``quant`` packed as the tuned backend
    packs them (or a given ``stream``)."""
    from mcu.backends.optimized.tuned import pack_layer

    if stream is None:
        stream = pack_layer(np.asarray(w, dtype=np.int8).reshape(w.shape[0], -1), bias, quant.m, quant.s,
                            params.get("output_offset", 0))
    stream = np.ascontiguousarray(stream, dtype=np.int32)
    p = _fields(Conv2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    st = lib().mcu_conv2d_packed_s8(ctx, ctypes.byref(p), ptr(x), ptr(stream), ptr(out))
    return st, out


def depthwise_conv2d(x, w, bias, quant: Quant, params: dict, ctx=None):
    p = _fields(DepthwiseConv2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    st = lib().mcu_depthwise_conv2d_s8(ctx, ctypes.byref(p), ctypes.byref(quant.struct), ptr(x), ptr(w),
                                       ptr(bias), ptr(out))
    return st, out


def linear(x, w, bias, quant: Quant, params: dict, ctx=None):
    p = _fields(LinearS8Params, params)
    out = np.zeros((params["batch"], params["out_features"]), dtype=np.int8)
    st = lib().mcu_linear_s8(ctx, ctypes.byref(p), ctypes.byref(quant.struct), ptr(x), ptr(w), ptr(bias),
                             ptr(out))
    return st, out


def binary(name, a, b, params: dict, out=None):
    p = _fields(BinaryS8Params, params)
    if out is None:
        out = np.zeros(tuple(params["out_shape"][: params["rank"]]), dtype=np.int8)
    st = getattr(lib(), f"mcu_{name}_s8")(ctypes.byref(p), ptr(a), ptr(b), ptr(out))
    return st, out


def pool2d(name, x, params: dict):
    p = _fields(Pool2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8)
    st = getattr(lib(), f"mcu_{name}_pool2d_s8")(ctypes.byref(p), ptr(x), ptr(out))
    return st, out


def max_pool1d(x, params: dict, out=None):
    """mcu_max_pool1d_s8 (windows one row high); ``out`` may be given to run in place."""
    p = _fields(Pool2dS8Params, params)
    out = np.zeros(tuple(params["output"]), dtype=np.int8) if out is None else out
    st = lib().mcu_max_pool1d_s8(ctypes.byref(p), ptr(x), ptr(out))
    return st, out


def mean_hw(x, params: dict):
    p = _fields(MeanHwS8Params, params)
    n, _, _, c = params["input"]
    out = np.zeros((n, c), dtype=np.int8)
    st = lib().mcu_mean_hw_s8(ctypes.byref(p), ptr(x), ptr(out))
    return st, out


def softmax_masked(x, hidden, params: dict, out=None):
    """mcu_softmax_masked_s8: ``hidden`` uint8 [mask_rows, axis]; ``out`` may be ``x`` (exact aliasing)."""
    p = _fields(SoftmaxMaskedS8Params, params)
    if out is None:
        out = np.zeros_like(x)
    st = lib().mcu_softmax_masked_s8(ctypes.byref(p), ptr(hidden), ptr(x), ptr(out))
    return st, out


def softmax(x, params: dict, out=None):
    p = _fields(SoftmaxS8Params, params)
    if out is None:
        out = np.zeros_like(x)
    st = lib().mcu_softmax_s8(ctypes.byref(p), ptr(x), ptr(out))
    return st, out
