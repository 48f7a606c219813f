"""The ATen ops that still run as fp32 islands in int8 models (issue 18): no int8 kernel, so the
quantizer leaves them unannotated (or the lowering keeps them float) and the int8 model runs them in
fp32 between a dequantize and a quantize, as the partition report names them.

tests/test_islands_s8.py quantizes a small model with every ATen op the frontend lowers and checks that
exactly these are islands, so this list cannot drift from what a build does; ``mcu ops`` prints it.
"""

from __future__ import annotations

# ATen overload (mcu.edge.op_name) -> why it has no int8 form
ISLANDS: dict[str, str] = {
    "aten.native_group_norm.default": "no TFLite integer semantics",
    "aten._native_batch_norm_legit.no_stats": "instance norm: no TFLite integer semantics",
    "aten.var.correction": "no TFLite integer semantics",
    "aten._native_batch_norm_legit_no_training.default": "a batch norm that does not follow a convolution "
                                                         "(where it folds) has no int8 kernel",
}
