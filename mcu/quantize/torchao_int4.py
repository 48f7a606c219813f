"""torchao's 4-bit groupwise weight-only quantization, applied to a copy of the user's model.

``IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size))`` is the torchao
configuration that runs and exports on any CPU build (its packed "opaque" formats and
``Int4WeightOnlyConfig`` do not); embedding tables get int8 values with a scale per row
(``IntxWeightOnlyConfig(int8, PerAxis(0))``). The exported graph dequantizes each weight with
``torchao.dequantize_affine``, which mcu turns back into packed 4-bit weights. Linear layers whose input
width is not a multiple of the group size are left fp32.
"""

from __future__ import annotations

import copy

import torch

DEFAULT_GROUP_SIZE = 32


def has_int4_weights(model: torch.nn.Module) -> bool:
    """Whether torchao already quantized some weight of the model (then it is used as it is)."""
    return any(type(p).__name__ == "IntxUnpackedToInt8Tensor" for p in model.parameters())


def int4_weight_model(model: torch.nn.Module, group_size: int = DEFAULT_GROUP_SIZE) -> torch.nn.Module:
    if has_int4_weights(model):
        return model
    # lazy: keeps torchao out of this module's import
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    # lazy: keeps torchao out of this module's import
    from torchao.quantization.granularity import PerGroup

    quantized = copy.deepcopy(model)

    def eligible(module: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and module.in_features % group_size == 0

    quantize_(quantized, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group_size)),
              filter_fn=eligible)
    # Embedding tables: int8 with one scale per row (a token's vector), a quarter of their fp32 bytes.
    # lazy: keeps torchao out of this module's import
    from torchao.quantization.granularity import PerAxis

    quantize_(quantized, IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
              filter_fn=lambda module, _fqn: isinstance(module, torch.nn.Embedding))
    return quantized
