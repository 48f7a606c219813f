"""ctypes bindings to the C kernels in the host build (``mcu._native``), for tests.

The structs mirror runtime_c/include/mcu/kernels_f32.h and kernels_generic.h
field for field; ``check_layout`` compares their sizes with what the C headers
imply so a header change that is not mirrored here fails loudly.
"""

from __future__ import annotations

import ctypes
import functools
from ctypes import POINTER, c_float, c_int, c_int32, c_void_p

import numpy as np

MCU_MAX_DIMS = 6

MCU_OK = 0
MCU_ERR_NULL_POINTER = 1
MCU_ERR_INVALID_ARG = 2
MCU_ERR_SHAPE = 3
MCU_ERR_UNSUPPORTED = 4
MCU_ERR_BUFFER_TOO_SMALL = 5

INF = float("inf")

Dims = c_int32 * MCU_MAX_DIMS


class Shape4(ctypes.Structure):
    _fields_ = [("n", c_int32), ("h", c_int32), ("w", c_int32), ("c", c_int32)]


class Conv2dParams(ctypes.Structure):
    _fields_ = [
        ("input", Shape4),
        ("output", Shape4),
        ("kernel_h", c_int32),
        ("kernel_w", c_int32),
        ("stride_h", c_int32),
        ("stride_w", c_int32),
        ("pad_top", c_int32),
        ("pad_left", c_int32),
        ("dilation_h", c_int32),
        ("dilation_w", c_int32),
        ("groups", c_int32),
        ("act_min", c_float),
        ("act_max", c_float),
    ]


class LinearParams(ctypes.Structure):
    _fields_ = [
        ("batch", c_int32),
        ("in_features", c_int32),
        ("out_features", c_int32),
        ("act_min", c_float),
        ("act_max", c_float),
    ]


class Pool2dParams(ctypes.Structure):
    _fields_ = [
        ("input", Shape4),
        ("output", Shape4),
        ("kernel_h", c_int32),
        ("kernel_w", c_int32),
        ("stride_h", c_int32),
        ("stride_w", c_int32),
        ("pad_top", c_int32),
        ("pad_left", c_int32),
        ("pad_bottom", c_int32),
        ("pad_right", c_int32),
        ("dilation_h", c_int32),
        ("dilation_w", c_int32),
        ("count_include_pad", c_int32),
        ("divisor_override", c_int32),
        ("act_min", c_float),
        ("act_max", c_float),
    ]


class BinaryParams(ctypes.Structure):
    _fields_ = [
        ("rank", c_int32),
        ("out_shape", Dims),
        ("a_strides", Dims),
        ("b_strides", Dims),
        ("act_min", c_float),
        ("act_max", c_float),
    ]


class PermuteParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("in_shape", Dims), ("perm", Dims)]


class PadParams(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("in_shape", Dims), ("pad_before", Dims), ("pad_after", Dims)]


def shape4(n: int, h: int, w: int, c: int) -> Shape4:
    return Shape4(n, h, w, c)


def dims(values) -> ctypes.Array:
    """A zero-filled int32[MCU_MAX_DIMS] holding ``values``."""
    values = [int(v) for v in values]
    return Dims(*(values + [0] * (MCU_MAX_DIMS - len(values))))


def ptr(array: np.ndarray | None) -> int | None:
    """Address of a numpy array's data, or None (NULL)."""
    if array is None:
        return None
    return array.ctypes.data


_P = c_void_p  # every tensor pointer is passed as an address

_SIGNATURES = {
    "mcu_conv2d_f32": [POINTER(Conv2dParams), _P, _P, _P, _P],
    "mcu_linear_f32": [POINTER(LinearParams), _P, _P, _P, _P],
    "mcu_max_pool2d_f32": [POINTER(Pool2dParams), _P, _P],
    "mcu_avg_pool2d_f32": [POINTER(Pool2dParams), _P, _P],
    "mcu_mean_hw_f32": [POINTER(Shape4), _P, _P],
    "mcu_add_f32": [POINTER(BinaryParams), _P, _P, _P],
    "mcu_sub_f32": [POINTER(BinaryParams), _P, _P, _P],
    "mcu_mul_f32": [POINTER(BinaryParams), _P, _P, _P],
    "mcu_div_f32": [POINTER(BinaryParams), _P, _P, _P],
    "mcu_clamp_f32": [c_int32, c_float, c_float, _P, _P],
    "mcu_sigmoid_f32": [c_int32, _P, _P],
    "mcu_tanh_f32": [c_int32, _P, _P],
    "mcu_hardswish_f32": [c_int32, _P, _P],
    "mcu_softmax_f32": [c_int32, c_int32, c_int32, _P, _P],
    "mcu_batch_norm_f32": [c_int32, c_int32, c_int32, _P, _P, _P, _P],
    "mcu_permute": [POINTER(PermuteParams), c_int32, _P, _P],
    "mcu_concat": [c_int32, c_int32, POINTER(c_int32), POINTER(c_void_p), _P],
    "mcu_pad": [POINTER(PadParams), c_int32, _P, _P, _P],
    "mcu_copy": [c_int32, _P, _P],
}

# Sizes the C headers imply (all members are 4 bytes, no padding).
_EXPECTED_SIZES = {
    Shape4: 16,
    Conv2dParams: 2 * 16 + 9 * 4 + 2 * 4,
    LinearParams: 3 * 4 + 2 * 4,
    Pool2dParams: 2 * 16 + 12 * 4 + 2 * 4,
    BinaryParams: 4 + 3 * 4 * MCU_MAX_DIMS + 2 * 4,
    PermuteParams: 4 + 2 * 4 * MCU_MAX_DIMS,
    PadParams: 4 + 3 * 4 * MCU_MAX_DIMS,
}


def check_layout() -> None:
    for struct, size in _EXPECTED_SIZES.items():
        assert ctypes.sizeof(struct) == size, (struct.__name__, ctypes.sizeof(struct), size)


@functools.cache
def lib() -> ctypes.CDLL:
    """The host build of the runtime, with argument types set for every kernel."""
    import mcu._native

    handle = ctypes.CDLL(mcu._native.__file__)
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.argtypes = argtypes
        fn.restype = c_int
    return handle


def concat_args(inputs: list[np.ndarray | None], chunk_bytes: list[int]):
    """(chunk_bytes array, inputs pointer array) for mcu_concat."""
    chunks = (c_int32 * len(chunk_bytes))(*chunk_bytes)
    ptrs = (c_void_p * len(inputs))(*[ptr(a) for a in inputs])
    return chunks, ptrs
