"""Quantization-aware training from the model file (``--qat``): the file's ``qat_train`` fine-tunes the model
fake-quantized exactly as post-training quantization would quantize it, here at 4-bit weights, and the
result compiles and runs bit-exact like any other w4a8 model."""

from __future__ import annotations

import functools

from pathlib import Path

import numpy as np
import pytest
import torch

from mcu.api import compile_spec
from mcu.capture.loader import ModelSpec, load_model_file
from mcu.errors import McuError
from mcu.quantize.qat import with_qat
from repo import EXAMPLES

pytestmark = pytest.mark.xdist_group("digits_qat")  # one worker loads (trains) the digits model once


@pytest.fixture
def digits() -> ModelSpec:
    return _digits()


@functools.lru_cache(maxsize=1)  # per worker: a module fixture is set up again when other modules' tests interleave
def _digits() -> ModelSpec:
    return load_model_file(EXAMPLES / "digits_cnn.py")  # trains the float model (a few seconds)


def test_w4a8_qat_from_the_model_file_trains_4_bit_weights_and_stays_bit_exact(digits: ModelSpec) -> None:
    spec = digits
    before = {k: v.clone() for k, v in spec.model.state_dict().items()}
    trained = with_qat(spec, "w4a8")
    # The float model is left as it was (the exported graph shares its parameters until copied).
    assert trained.extras["float_model"] is spec.model
    assert all(torch.equal(v, spec.model.state_dict()[k]) for k, v in before.items())
    cm = compile_spec(trained, "mps2-an505", "w4a8")
    weighted = [op for op in cm.graph.ops if op.kind in ("conv2d", "linear")]
    assert weighted and all(op.attrs.get("weight_bits") == 4 for op in weighted)
    assert all(int(np.abs(op.inputs[1].data).max()) <= 7 for op in weighted)
    # (its accuracy is `mcu eval --qat`'s table in the README)
    for x, _ in spec.extras["eval_data"][:8]:
        for ref, host in zip(cm.reference_raw(x), cm.run_raw(x)):
            np.testing.assert_array_equal(host, ref)


def test_qat_needs_a_static_mode_and_the_file_s_training_loop(digits: ModelSpec, tmp_path: Path) -> None:
    with pytest.raises(McuError, match=r"--qat trains for static quantization; --quantize none has none"):
        with_qat(digits, "none")
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nmodel = torch.nn.Linear(4, 2)\nexample_inputs = (torch.zeros(1, 4),)\n"
                     "calibration = [(torch.ones(1, 4),)]\n")
    with pytest.raises(McuError, match=r"plain\.py: --qat needs a function `qat_train\(prepared\)` in the model file"):
        with_qat(load_model_file(plain), "int8")
