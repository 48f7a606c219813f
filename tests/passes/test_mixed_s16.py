"""int16 activations as a ``--quantize mixed`` candidate (mcu/passes/mixed_s16.py): a widened run of layers
runs bit-exact with the integer reference as a program file and as generated C on the host, with borders
only where an int8 tensor meets it; the runs offered are the chained ones; a run that buys back accuracy lets
the other layers narrow further within the same budget, and the report says which layers run at int16."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from mcu.api import LoweredModel, backend_options, lower
from mcu.ir import Op
from mcu.passes import mixed, mixed_s16
from mcu.passes.mixed_choice import Metric, choose_precision, widenings
from mcu.program.format import KERNEL_IDS
from mcu.quantize import modes
from mcu.quantize.sensitivity import scorer


class _Outlier(torch.nn.Module):
    """Four linear layers; unit 0 of the first hidden tensor is 60 times the others."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.fc1, self.fc2, self.fc3, self.fc4 = nn.Linear(8, 8), nn.Linear(8, 48), nn.Linear(48, 48), nn.Linear(48, 4)
        with torch.no_grad():
            self.fc1.weight[0] *= 60
            self.fc1.bias[0] = abs(float(self.fc1.bias[0])) * 60
            self.fc2.weight[:, 0] /= 60

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc2(torch.relu(self.fc1(x))))
        return self.fc4(torch.relu(self.fc3(h)))


@pytest.fixture(scope="module")
def outlier() -> LoweredModel:
    torch.manual_seed(0)
    xs = [torch.randn(1, 8) for _ in range(6)]
    return lower(_Outlier().eval(), (xs[0],), quantize="int8", calibration=xs, test_inputs=[(x,) for x in xs[:2]])


def test_the_border_kernels_have_the_new_ids() -> None:
    assert KERNEL_IDS["mcu_requantize_s16_s8"] == 138 and KERNEL_IDS["mcu_requantize_s8_s16"] == 139


def test_a_widened_run_is_bit_exact_in_c_and_program_files(outlier) -> None:
    graph = copy.deepcopy(outlier.graph)
    layers = mixed.layers(graph.ops)
    assert widenings(graph, layers) == [(0, 1), (0, 1, 2), (1, 2), (1, 2, 3), (2, 3)]  # at most 3 layers
    first, second = graph.ops[layers[0]], graph.ops[layers[1]]
    mixed_s16.widen(graph, {layers[0], layers[1]})
    borders = [op for op in graph.ops if op.kind == "requantize"]
    assert [(b.inputs[0].dtype, b.output.dtype) for b in borders] == [("int8", "int16"), ("int16", "int8")]
    # the tensor between the two stays int16 (no border there), the others int8
    assert first.output is second.inputs[0] and first.output.dtype == "int16"
    assert second.output.dtype == "int16" and graph.ops[graph.ops.index(second) + 1] is borders[1]
    assert all(op.output.dtype == "int8" for op in graph.ops if op.kind == "linear" and op not in (first, second))
    # the layout a mixed build with the flash objective keeps: the portable 16x8 kernels, as it counts them
    cm = dataclasses.replace(outlier, quantize=modes.MIXED, graph=graph).compile(
        "mps2-an505", backend_options(packed_weights=False))
    kernels = "\n".join(cm.library.files.values())
    assert "mcu_requantize_s8_s16(" in kernels and "mcu_requantize_s16_s8(" in kernels
    assert "mcu_linear_s16(" in kernels
    program = cm.runtime_program()  # no kernel a program file cannot express: run_raw runs it, not the C
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (program.method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)


class _WeightsOnly:
    """A flash objective of the layers' constants alone (no kernel code), so that this small model's
    weights decide."""

    where = "weights only"

    def layer_bytes(self, op: Op, form: str) -> int:
        w = op.inputs[1]
        if form == mixed.INT4:
            return (w.numel + 1) // 2
        if form in mixed.LUT.values():
            return (w.numel * int(form[3:]) + 7) // 8 + w.shape[0] * (1 << int(form[3:]))
        return w.numel + (4 * w.shape[0] if form == mixed_s16.A16 else 0)

    def code_bytes(self, layers: list[tuple[Op, str]]) -> int:
        return 0


def test_int16_activations_let_other_layers_narrow(outlier) -> None:
    """At budget 0 (nothing below all-int8's SQNR), int8 activations keep every layer int8 or narrow less;
    widening the outlier's run buys the accuracy back and the wide layers narrow: less flash, score still
    within budget; the report names the layers at int16; the choice repeats."""
    score = scorer(outlier.spec)
    metric = Metric(score.metric, score.sqnr)
    measured = score.memoized({})
    flash = _WeightsOnly()

    def choose(int16: bool):
        g = choose_precision(copy.deepcopy(outlier.graph), measured, metric, 0.0, "flash", score.samples, flash,
                             int16=int16)
        assert g.precision is not None
        return g, g.precision, sum(layer.weight_bytes for layer in g.precision.layers)

    g8, p8, bytes8 = choose(False)
    g16, p16, bytes16 = choose(True)
    assert all(layer.activations == "int8" for layer in p8.layers)
    wide = [layer for layer in p16.layers if layer.activations == "int16"]
    assert len(wide) >= 2 and all(layer.weights == "int8" for layer in wide)
    assert bytes16 < bytes8 and p16.score >= p16.int8_score
    assert any(layer.activations == "int8" and layer.weights != "int8" for layer in p16.layers)
    assert "int16" in "\n".join(p16.lines()) and p16.to_json()["layers"][0]["activations"] in ("int8", "int16")
    again = choose_precision(copy.deepcopy(outlier.graph), measured, metric, 0.0, "flash", score.samples, flash)
    assert again.precision == p16
    # what was measured is what runs: the chosen graph's reference score is the reported one
    assert score.score(g16) == pytest.approx(p16.score)


class _Convs(torch.nn.Module):
    """A convolution, a depthwise and a pointwise one, chained, then a mean and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),
                                      nn.Conv2d(8, 8, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def test_a_widened_convolution_run_is_bit_exact() -> None:
    """conv2d, depthwise and pointwise at int16 activations (the mean after them reads int8 again): the
    program file and the generated C on the host equal the reference."""
    torch.manual_seed(0)
    xs = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    lowered = lower(_Convs().eval(), (xs[0],), quantize="int8", calibration=xs, test_inputs=[(x,) for x in xs[:2]])
    graph = copy.deepcopy(lowered.graph)
    layers = mixed.layers(graph.ops)
    assert widenings(graph, layers) == [(0, 1), (0, 1, 2), (1, 2)]  # the mean breaks the chain before fc
    mixed_s16.widen(graph, set(layers[:3]))
    assert [(op.kind, op.inputs[0].dtype, op.output.dtype) for op in graph.ops][:5] == [
        ("requantize", "int8", "int16"), ("conv2d", "int16", "int16"), ("depthwise_conv2d", "int16", "int16"),
        ("conv2d", "int16", "int16"), ("requantize", "int16", "int8")]
    cm = dataclasses.replace(lowered, quantize=modes.MIXED, graph=graph).compile(
        "mps2-an505", backend_options(packed_weights=False))
    program = cm.runtime_program()
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (program.method("forward").run_raw(*cm.encode_inputs(x)), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("kind,index,value", [("int16", 3, 31), ("int16", 1, 129), ("int8", 3, 128),
                                              ("int8", 5, 128)])
def test_the_loader_refuses_a_border_out_of_range(monkeypatch, outlier, kind: str, index: int, value: int) -> None:
    """A border's parameter words outside what its kernel accepts (a shift of 31, an int8 offset past the
    range, an int8 clamp above 127) fail at load, before any run (mcu_program_params.c)."""
    from mcu.backends.portable import core as portable
    from mcu.program.host import Program, ProgramError

    graph = copy.deepcopy(outlier.graph)
    layers = mixed.layers(graph.ops)
    mixed_s16.widen(graph, {layers[0], layers[1]})
    cm = dataclasses.replace(outlier, quantize=modes.MIXED, graph=graph).compile(
        "mps2-an505", backend_options(packed_weights=False))
    Program.load(cm.program_image().program)  # as emitted: loads
    original = portable.EMITTERS[("requantize", kind)]

    def tampered(op, ref):
        call = original(op, ref)
        if op.inputs[0].dtype != op.output.dtype:
            call.scalars = [*call.scalars[:index], value, *call.scalars[index + 1:]]
        return call

    monkeypatch.setitem(portable.EMITTERS, ("requantize", kind), tampered)
    with pytest.raises(ProgramError, match="(?i)invalid"):
        Program.load(cm.program_image().program)
