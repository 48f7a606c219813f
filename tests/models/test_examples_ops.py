"""The examples of the wider op set (GRU and LSTM keyword spotters, transformer block, U-Net-lite, TCN, convolutional
autoencoder, MobileNetV2-0.35) on the simulated Cortex-M33 (mps2-an505): fp32 within 1e-4 of the
largest eager output; int8 equal to the Python reference where it is bit-exact and agreeing with eager
PyTorch on the bundled inputs; and every build fitting pico2 (520 KiB RAM, 4 MiB flash). Compiled
models are shared through tests/support/compiled.py; firmware builds are cached on disk by content."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiled import compiled_model
from repo import have_cross_tools, requires_qemu

# Whole models end to end: the full run only (make test), not make test-fast.
pytestmark = pytest.mark.slow
# One xdist worker per example (tests/conftest.py): its lowering is shared by its modes' tests and boards.
GROUP_BY_EXAMPLE = True

FP32_TOL = 1e-4
CLASSIFIERS = ["kws_gru", "transformer_block", "tcn", "mobilenet_v2",
               "kws_lstm"]  # integer recurrent layers
EXAMPLES = CLASSIFIERS + ["unet_lite", "conv_autoencoder"]
# int8 models with fp32 islands the Python reference cannot predict bit for bit (fp32 arithmetic through
# libm): the firmware is checked against the same C built for the host within one output step
# (CompiledModel.tolerances) instead. The reasons name the islands (graph.fallbacks). The transformer's
# one island (the add of its learned positions) is an fp32 add the reference computes exactly.
# (kws_gru's GRU runs as one integer layer, mcu_gru_s8, not as an unrolled fp32 island.)
NOT_EXACT: dict[str, str] = {}
_SIMS: dict[tuple[str, str], object] = {}


def _simulate(name: str, quantize: str):
    """One QEMU run per model and mode, shared by the tests of this module."""
    key = (name, quantize)
    if key not in _SIMS:
        _SIMS[key] = compiled_model(name, "mps2-an505", quantize).simulate()
    return _SIMS[key]


@pytest.fixture(scope="module", params=EXAMPLES)
def name(request) -> str:
    return request.param


@requires_qemu
@pytest.mark.qemu
def test_fp32_on_m33_matches_eager(name: str) -> None:
    cm = compiled_model(name, "mps2-an505", "none")
    sim = _simulate(name, "none")
    assert sim.passed, sim.console[-2000:]
    assert len(sim.outputs) == len(cm.spec.test_inputs)
    for got_row, want_row in zip(sim.outputs, cm.eager_outputs):
        for got, want in zip(got_row, want_row):
            assert got.shape == want.shape
            assert float(np.max(np.abs(got - want))) <= FP32_TOL * float(np.max(np.abs(want)))


def _int8_agrees_with_eager(name: str, got: np.ndarray, want: np.ndarray, step: float) -> None:
    if name in CLASSIFIERS:  # top-1
        assert int(np.argmax(got.reshape(-1))) == int(np.argmax(want.reshape(-1)))
    elif name == "unet_lite":  # a per-pixel class map: the argmax over channels, pixel by pixel
        agree = np.mean(np.argmax(got, axis=1) == np.argmax(want, axis=1))
        assert agree >= 0.98, agree
    else:  # a reconstruction: within a few output quantization steps everywhere
        assert float(np.max(np.abs(got - want))) <= 4 * step


@requires_qemu
@pytest.mark.qemu
def test_int8_on_m33_agrees_with_eager(name: str) -> None:
    cm = compiled_model(name, "mps2-an505", "int8")
    sim = _simulate(name, "int8")
    assert sim.passed, sim.console[-2000:]
    out = cm.graph.outputs[0]
    step = float(out.quant.scale[0]) if out.quant is not None else 0.0
    for v in range(len(cm.spec.test_inputs)):
        _int8_agrees_with_eager(name, sim.outputs[v][0], cm.eager_outputs[v][0], step)


@requires_qemu
@pytest.mark.qemu
def test_int8_on_m33_has_zero_differences_from_the_reference(name: str) -> None:
    cm = compiled_model(name, "mps2-an505", "int8")
    if not cm.reference_is_exact:
        assert name in NOT_EXACT, f"new fp32 islands: {cm.graph.fallbacks}"
        pytest.skip(NOT_EXACT[name])
    sim = _simulate(name, "int8")
    assert sim.passed, sim.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        # the device's codes (logical shape) against the reference's (memory order -> logical shape)
        for got, want in zip(sim.outputs_raw[v], cm.raw_outputs(cm.reference_raw(*x))):
            assert got.dtype == np.int8 and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not have_cross_tools(), reason="needs arm-none-eabi-gcc (run scripts/setup)")
@pytest.mark.parametrize("quantize", ["int8", "none"])
def test_fits_pico2(name: str, quantize: str) -> None:
    # The largest example (MobileNetV2-0.35 at int8) included: the firmware `mcu build --board pico2` would link
    # (the same build), whose command line and --json report tests/device/test_boards_pico2.py checks.
    cm = compiled_model(name, "pico2", quantize)
    fw = cm.build()  # raises McuError when the flash image is too large; the linker fails on RAM
    assert fw.flash_bytes <= cm.board.flash.length
    assert fw.ram_bytes <= cm.board.ram.length
    assert fw.uf2 is not None


# --- the user's path: `mcu run` and `mcu build` on the example files ---------------------------------


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("example,quantize", [("tcn", "int8"), ("conv_autoencoder", "none")])
def test_mcu_run_cli(example: str, quantize: str) -> None:
    from repo import EXAMPLES as EXAMPLE_DIR
    from cli_runner import mcu_in_process

    proc = mcu_in_process("run", "--board", "mps2-an505", str(EXAMPLE_DIR / f"{example}.py"), "--quantize", quantize,
                          "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["passed"] and report["exit_code"] == 0
    assert report["instructions"] > 0 and report["fp32_fallbacks"] == []
