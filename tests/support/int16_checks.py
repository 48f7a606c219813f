"""Checks the w8a16 model tests share: output SQNR against eager fp32, the generated C and the program file
equal to the integer reference on the host, and the firmware and the interpreter firmware equal to it."""

from __future__ import annotations

import functools
from typing import Callable, Iterable

import numpy as np
import torch

import mcu
from mcu.api import LoweredModel, lower
from mcu.ir import NUMPY_DTYPES
from mcu.program.device import run_program
from mcu.reference.interp import Reference


@functools.lru_cache(maxsize=None)
def lowered_seeded(make: Callable[[], torch.nn.Module], shape: tuple[int, ...], name: str, quantize: str, seed: int,
                   samples: int = 32) -> LoweredModel:
    """A test model made after ``torch.manual_seed(seed)``, calibrated on ``samples`` standard normal inputs of
    ``shape`` and bundled with three more as test inputs, captured, quantized and lowered once per process for
    each set of these arguments: they are all that decides it (the board decides only the compile)."""
    torch.manual_seed(seed)
    model = make().eval()
    calibration = [(torch.randn(*shape),) for _ in range(samples)]
    tests = [(torch.randn(*shape),) for _ in range(3)]
    return lower(model, calibration[0], quantize=quantize, calibration=calibration, test_inputs=tests, name=name)


def compile_seeded(make: Callable[[], torch.nn.Module], shape: tuple[int, ...], name: str, quantize: str, board: str,
                   seed: int, samples: int = 32) -> mcu.CompiledModel:
    """:func:`lowered_seeded` compiled for ``board``: what ``mcu.compile`` gives for the same model and inputs."""
    return lowered_seeded(make, shape, name, quantize, seed, samples).compile(board)


def assert_int16_kernels(cm: mcu.CompiledModel, kinds: set[str], sources: Iterable[str]) -> None:
    """No fp32 fallback, an exact reference, ``kinds`` among the ops and all of them int16, ``sources`` linked."""
    assert cm.graph.fallbacks == [] and Reference(cm.graph).exact
    assert kinds <= {op.kind for op in cm.graph.ops}
    assert all(op.output.dtype == "int16" for op in cm.graph.ops if op.kind in kinds)
    for src in sources:
        assert src in cm.library.kernel_sources


def output_sqnr_db(cm: mcu.CompiledModel) -> float:
    """SQNR of the deployed integer program's outputs against eager fp32 over the bundled test inputs."""
    signal = noise = 0.0
    for x in cm.spec.test_inputs:
        for got, want in zip(cm.run(*x), cm.eager(*x)):
            signal += float((want.double() ** 2).sum())
            noise += float(((got.double() - want.double()) ** 2).sum())
    return float(10 * np.log10(signal / noise))


def assert_c_and_program_equal_reference(cm: mcu.CompiledModel) -> None:
    """The host C build and the program file give the reference's int16 codes on every test input."""
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.runtime_program().method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                assert g.dtype == np.int16
                np.testing.assert_array_equal(g, r)


def assert_device_equals_reference(cm: mcu.CompiledModel, interpreter_elf) -> None:
    """The generated-C firmware and the program file on ``interpreter_elf`` give the reference's codes in the
    board's simulator."""
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    run = run_program(cm.board, interpreter_elf, cm.program_image(bundle_tests=True).program)
    assert run.passed, run.console[-2000:]
    for v, x in enumerate(cm.spec.test_inputs):
        want = cm.reference_raw(*x)
        for got, r in zip(sim.outputs_raw[v], cm.raw_outputs(want)):
            np.testing.assert_array_equal(got, r)
        device = [run.output("forward", v, i, NUMPY_DTYPES[t.dtype], t.numel) for i, t in enumerate(cm.graph.outputs)]
        for got, r in zip(device, want):
            np.testing.assert_array_equal(got, r)


def device_sqnr_db(cm: mcu.CompiledModel, sim) -> float:
    """SQNR of a simulated firmware's outputs (``cm.simulate()``) against eager fp32 over the test inputs."""
    signal = noise = 0.0
    for v, x in enumerate(cm.spec.test_inputs):
        for got, want in zip(sim.outputs[v], cm.eager(*x)):
            w = want.detach().double().numpy().reshape(np.shape(got))
            signal += float((w ** 2).sum())
            noise += float(((np.asarray(got, dtype=np.float64) - w) ** 2).sum())
    return float(10.0 * np.log10(signal / noise))
