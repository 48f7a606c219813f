"""w4a8: int8 activations with 4-bit per-channel weights of convolutions, depthwise and linear layers. The
quantizer's weights sit on [-7, 7]; the generated C, the program file on the host and the Python integer
reference agree bit for bit; the weights take half the int8 bytes in both outputs; the accuracy stays
close to fp32."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from mcu.layouts import pack_s4
from mcu.reference.interp import Reference
from repo import EXAMPLES

WEIGHTED = ("conv2d", "depthwise_conv2d", "linear")


@pytest.mark.parametrize("name", ["small_cnn", "ds_cnn", "fc_autoencoder"])
def test_w4a8_is_bit_exact_with_the_reference_in_c_and_program(compiled, name: str) -> None:
    cm = compiled(name, quantize="w4a8")
    weighted = [op for op in cm.graph.ops if op.kind in WEIGHTED]
    assert weighted and cm.graph.fallbacks == []
    for op in weighted:
        w = op.inputs[1]
        assert op.attrs["weight_bits"] == 4 and w.quant is not None and w.quant.qmax == 7
        assert w.data is not None and int(np.abs(w.data).max()) <= 7, op.name
        assert op.attrs["backend"] == "portable"
    assert Reference(cm.graph).exact
    for x in cm.spec.test_inputs[:3]:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)


def test_w4a8_weights_are_packed_in_c_and_program(compiled) -> None:
    cm = compiled("small_cnn", quantize="w4a8")
    source = "\n".join(cm.library.files.values())
    for op in cm.graph.ops:
        if op.kind in WEIGHTED:
            packed = op.attrs["s4_weights"]
            assert packed.nbytes == (op.inputs[1].numel + 1) // 2
            np.testing.assert_array_equal(packed.data, pack_s4(op.inputs[1].data))
            assert packed.name in source
            assert not re.search(rf"{re.escape(op.inputs[1].name)}\b", source)  # nor the int8 codes besides
    int8 = compiled("small_cnn", quantize="int8")
    saved = sum(op.inputs[1].nbytes - op.attrs["s4_weights"].nbytes for op in cm.graph.ops if op.kind in WEIGHTED)
    assert len(int8.program_image().program) - len(cm.program_image().program) >= 0.9 * saved


def test_w4a8_output_stays_close_to_fp32(compiled) -> None:
    """SQNR of the dequantized outputs against eager fp32 on the bundled inputs: 4-bit weights cost accuracy,
    not correctness."""
    cm = compiled("small_cnn", quantize="w4a8")
    signal = noise = 0.0
    for x in cm.spec.test_inputs[:3]:
        for got, want in zip(cm.run(*x), cm.eager(*x)):
            want = want.detach().to(torch.float64)
            signal += float((want ** 2).sum())
            noise += float(((got.to(torch.float64) - want) ** 2).sum())
    assert 10 * np.log10(signal / max(noise, 1e-30)) > 15.0


def test_w4a8_is_refused_by_the_other_backends_by_name() -> None:
    from mcu.api import compile_file

    cm = compile_file(EXAMPLES / "small_cnn.py", board="mps2-an505", quantize="w4a8")
    reasons = {r.why for r in cm.partitions.refusals if r.backend == "optimized"}
    assert "no optimized kernel for 4-bit weights" in reasons
