"""The int8 variant table (mcu/backends/portable/variants.py): which kernel each op gets, and that the table is
well formed (every row's source exists, every kind ends in a variant that always applies)."""

from __future__ import annotations

import numpy as np

from mcu.backends.portable.variants import INT8_VARIANTS, select_variant
from mcu.ir import Op, Tensor
from mcu.paths import kernel_source


def _conv(kind: str, c: int, oc: int, k: int, stride: int, pad: int, h: int = 5) -> Op:
    oh = (h + 2 * pad - k) // stride + 1
    wshape = (oc, 1, k, k) if kind == "depthwise_conv2d" else (oc, c, k, k)
    w = Tensor(name="w", shape=wshape, dtype="int8", data=np.zeros(wshape, dtype=np.int8))
    return Op(kind, [Tensor(name="x", shape=(1, c, h, h), dtype="int8"), w],
              [Tensor(name="y", shape=(1, oc, oh, oh), dtype="int8")],
              {"stride": (stride, stride), "padding": (pad, pad), "dilation": (1, 1),
               "groups": c if kind == "depthwise_conv2d" else 1, "ch_mult": 1})


def test_selection() -> None:
    assert select_variant(_conv("conv2d", 8, 16, 1, 1, 0), False).function == "mcu_conv2d_1x1_s8"
    assert select_variant(_conv("conv2d", 8, 16, 1, 2, 0), False).function == "mcu_conv2d_s8"
    assert select_variant(_conv("conv2d", 8, 16, 3, 1, 1), False).function == "mcu_conv2d_s8"
    dw = _conv("depthwise_conv2d", 8, 8, 3, 1, 1)
    assert select_variant(dw, True).function == "mcu_depthwise_conv2d_s8_inplace"
    assert select_variant(dw, False).function == "mcu_depthwise_conv2d_s8"
    assert select_variant(_conv("depthwise_conv2d", 8, 8, 3, 2, 1), True).function == "mcu_depthwise_conv2d_s8"


def test_table_is_well_formed() -> None:
    for v in INT8_VARIANTS:  # every row is one of our portable kernels
        assert kernel_source(v.source).is_file(), v.source
        assert v.function in kernel_source(v.source).read_text()
    for kind in {v.kind for v in INT8_VARIANTS}:
        rows = [v for v in INT8_VARIANTS if v.kind == kind]
        assert rows[-1].applies.__name__ == "_always", f"{kind} has no fallback row"


def test_other_backends_take_ops_through_the_partitioner_not_the_table() -> None:
    """An op another backend took is emitted by that backend (the registry), never by a variant row."""
    op = _conv("conv2d", 8, 16, 1, 1, 0)
    assert select_variant(op, False).function == "mcu_conv2d_1x1_s8"
    op.attrs["backend"] = "cmsis-nn"
    assert select_variant(op, False).function == "mcu_conv2d_1x1_s8"  # the table ignores the mark
    assert not [v for v in INT8_VARIANTS if not v.function.startswith("mcu_")]
