"""Quantization-aware training from a model file: ``--qat`` with ``--quantize int8`` or ``w4a8``.

The model file names its own fine-tuning loop, ``qat_train(prepared)``: it trains the fake-quantized module
that :func:`mcu.quantize.flow.prepare_qat` makes with the same quantizer settings as post-training
quantization (the same observers' ranges, per-channel symmetric weights on [-127, 127] or [-7, 7]); the
converted module then compiles like any pre-quantized model. The fake-quantized module is an exported graph:
the loop must not call ``.train()`` or ``.eval()`` on it (mcu moves it between the two modes itself).
"""

from __future__ import annotations

import copy
import dataclasses
import warnings

from mcu.capture.loader import ModelSpec
from mcu.errors import McuError
from mcu.progress import stage
from mcu.quantize import modes
from mcu.quantize.flow import convert, prepare_qat


def with_qat(spec: ModelSpec, quantize: str) -> ModelSpec:
    """``spec`` with its module fine-tuned at ``quantize``'s precision by the file's ``qat_train`` and
    converted; the float module stays in ``extras["float_model"]`` for comparisons."""
    where = str(spec.path or spec.name)
    quantize = modes.INT8 if quantize == modes.AUTO else quantize
    if not modes.is_static(quantize):
        raise McuError(f"--qat trains for static quantization; --quantize {quantize} has none",
                       hint="use --quantize int8 or --quantize w4a8 with --qat")
    train = spec.extras.get("qat_train")
    if not callable(train):
        raise McuError(f"{where}: --qat needs a function `qat_train(prepared)` in the model file",
                       hint="define qat_train to run your training loop (a few epochs at a low learning rate) "
                            "on the fake-quantized module it is given")
    with stage("quantization-aware training"):
        # A copy: the exported graph shares its parameters with the module it came from, and training them
        # would change the float model the quantized one is compared with.
        prepared = prepare_qat(copy.deepcopy(spec.model), spec.example_inputs,
                               weight_bits=modes.weight_bits(quantize))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # lazy: keeps torchao out of this module's import
            from torchao.quantization.pt2e import move_exported_model_to_train

            move_exported_model_to_train(prepared)
        train(prepared)
        converted = convert(prepared)
    return dataclasses.replace(spec, model=converted, extras={**spec.extras, "float_model": spec.model})
