"""Mixed precision per layer (``--quantize mixed --accuracy-budget X``): the chooser's path lowers the cost at
every step and a looser budget never costs more; each layer's rewrite (int4 from the int8 codes, look-up
tables) runs bit-exact with the integer reference in the generated C and the program file on the host; the
choice meets its budget, is deterministic, and is reported; the options are refused by name where they do
not apply."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_runner import assert_one_line_error, mcu_in_process
from mcu.api import LoweredModel, backend_options, lower
from mcu.backends.base import PartitionReport
from mcu.backends.mixed_flash import BoardFlash
from mcu.backends.optimized import compact
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.layouts import channel_rows
from mcu.passes import mixed
from mcu.plan.contracts import scratch_bytes
from mcu.passes.mixed_choice import Metric, Option, choose_index, choose_precision, path
from mcu.quantize import modes
from mcu.quantize.sensitivity import scorer
from repo import EXAMPLES

WEIGHTED = ("conv2d", "depthwise_conv2d", "linear")

_option = st.builds(Option, name=st.just("x"), cost=st.integers(0, 1000), loss=st.floats(0, 10))


def _table(rows: list[list[Option]]) -> list[list[Option]]:
    """Option 0 of each layer is int8: no loss."""
    return [[dataclasses.replace(r[0], loss=0.0), *r[1:]] for r in rows]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(_option, min_size=1, max_size=5), min_size=1, max_size=6),
       st.lists(st.floats(0, 30), min_size=40, max_size=40), st.floats(0, 20), st.floats(0, 20))
def test_a_looser_budget_never_costs_more(rows, measured, a, b) -> None:
    """Over any option table and any measured losses of its configurations, the path's cost falls at every
    step, and the configuration a budget takes costs no more under a looser budget."""
    options = _table(rows)
    configs = path(options)
    costs = [sum(options[i][k].cost for i, k in enumerate(c)) for c in configs]
    assert configs[0] == [0] * len(options)
    assert all(x > y for x, y in zip(costs, costs[1:]))
    assert path(options) == configs  # deterministic

    # the chooser ranks by a total that need not follow the path (kernel code is paid once per form)
    totals = [costs[k] + measured[(k + 7) % len(measured)] for k in range(len(configs))]

    def chosen(budget: float) -> int:
        return choose_index(totals, lambda k: measured[k % len(measured)] <= budget)

    tight, loose = sorted((a, b))
    assert totals[chosen(loose)] <= totals[chosen(tight)] <= totals[0]
    assert chosen(tight) == 0 or measured[chosen(tight) % len(measured)] <= tight


@settings(max_examples=30, deadline=None)
@given(st.floats(-20, 80), st.floats(0, 30), st.floats(0, 30))
def test_sqnr_losses_grow_as_the_score_falls(base, a, b) -> None:
    sqnr = Metric("sqnr_db", True)
    small, large = sorted((a, b))
    assert 0 <= sqnr.loss(base, base - small) <= sqnr.loss(base, base - large)
    assert sqnr.loss(base, base + 1) == 0
    assert Metric("top1", False).loss(90.0, 88.5) == 1.5


class _Tiny(torch.nn.Module):
    """A convolution, a depthwise, a pointwise convolution and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU(),
                                      nn.Conv2d(16, 8, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


@pytest.fixture(scope="module")
def tiny() -> LoweredModel:
    torch.manual_seed(0)
    xs = [torch.randn(1, 3, 8, 8) for _ in range(4)]
    return lower(_Tiny().eval(), (xs[0],), quantize="int8", calibration=xs, test_inputs=[(x,) for x in xs[:2]])


def test_each_rewrite_is_bit_exact_in_program_files(tiny) -> None:
    """int4 on the convolution, depthwise and linear layers, a 3-bit table on the pointwise one: the program
    file on the host equals the integer reference (the generated C reads the same constants; scripts/matrix
    --mode mixed runs it on the boards); int4 weights stay within half a 4-bit step of their int8 values."""
    lowered = dataclasses.replace(tiny, quantize=modes.MIXED, graph=copy.deepcopy(tiny.graph))
    layers = mixed.layers(lowered.graph.ops)
    assert [lowered.graph.ops[i].kind for i in layers] == ["conv2d", "depthwise_conv2d", "conv2d", "linear"]
    for i, choice in zip(layers, ("int4", "int4", "lut3", "int4")):
        op = lowered.graph.ops[i]
        before = channel_rows(op.inputs[1]).astype(np.float64) * np.array(op.inputs[1].quant.scale)[:, None]
        mixed.apply(op, choice)
        if choice == "int4":
            w = op.inputs[1]
            assert op.attrs["weight_bits"] == 4 and w.quant.qmax == 7
            rows = channel_rows(w).astype(np.float64)
            assert np.abs(rows).max() <= 7
            step = np.array(w.quant.scale)[:, None]
            assert np.all(np.abs(rows * step - before) <= step / 2 + 1e-12)
    cm = lowered.compile("mps2-an505")
    kernels = "\n".join(cm.library.files.values())
    assert "mcu_conv2d_s4" in kernels and "mcu_depthwise_conv2d_s4" in kernels and "mcu_linear_s4" in kernels
    assert "mcu_conv2d_lut_s8" in kernels
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for g, r in zip(cm.run_raw(*x), want):
            np.testing.assert_array_equal(g, r)


def test_the_choice_meets_its_budget_and_narrows_with_it(tiny) -> None:
    """Budgets 0, 3 and 100 dB: each choice's measured SQNR is within its budget (at 0: not below int8's; a
    layer may narrow where that loses nothing); the weights' bytes never grow with the budget; the same budget
    chooses the same again; the report names every layer."""
    score = scorer(tiny.spec)
    metric = Metric(score.metric, score.sqnr)
    measured = score.memoized({})  # the budgets share their path

    # counted on the M0+, whose narrow kernels are smaller than its int8 ones: on the M33 the s4 and table
    # kernels' code outweighs what this small model's weights save, and nothing would narrow
    flash = BoardFlash(load_board("mps2-an385-m0plus"))
    chosen = {b: choose_precision(copy.deepcopy(tiny.graph), measured, metric, b, "flash", score.samples, flash)
              for b in (0.0, 3.0, 100.0)}
    sizes = {b: sum(layer.weight_bytes for layer in g.precision.layers) + g.precision.code_bytes
             for b, g in chosen.items()}
    assert sizes[0.0] >= sizes[3.0] >= sizes[100.0] and sizes[100.0] < sizes[0.0]
    for b, g in chosen.items():
        p = g.precision
        assert p.score >= p.int8_score - b and p.metric == "sqnr_db" and p.samples == 4
        assert sizes[b] <= p.int8_bytes  # never more flash than all-int8 compact, which always meets the budget
        assert [layer.op for layer in p.layers] == [tiny.graph.ops[i].name for i in mixed.layers(tiny.graph.ops)]
    again = choose_precision(copy.deepcopy(tiny.graph), score.score, metric, 3.0, "flash", score.samples, flash)
    assert again.precision == chosen[3.0].precision
    text = "\n".join(chosen[3.0].precision.lines())
    assert all(layer.op in text for layer in chosen[3.0].precision.layers)
    # --json: the partition report carries it (and only under mixed)
    report = PartitionReport(precision=chosen[3.0].precision).to_json()
    assert [layer["weights"] for layer in report["precision"]["layers"]] == \
        [layer.weights for layer in chosen[3.0].precision.layers]
    assert "precision" not in PartitionReport().to_json()
    # the build lays the int8 layers out as the objective counted them: compact, not packed
    # (a layer at int16 activations runs the portable 16x8 kernel, whatever the layout)
    forms = {layer.op: layer.weights if layer.activations == "int8" else "a16"
             for layer in chosen[0.0].precision.layers}
    cm = dataclasses.replace(tiny, quantize=modes.MIXED, graph=chosen[0.0]).compile("mps2-an505")
    kernels = "\n".join(cm.library.files.values())
    assert "mcu_conv2d_packed_s8(" not in kernels
    assert ("mcu_conv2d_compact_s8(" in kernels) == any(forms[op.name] == "int8" for op in tiny.graph.ops
                                                       if op.kind == "conv2d" and op.name in forms)
    # instructions: int8 is the fastest weight form with int8 activations, so nothing narrows or widens
    fastest = choose_precision(copy.deepcopy(tiny.graph), measured, metric, 100.0, "instructions", score.samples,
                               flash)
    assert [layer.weights for layer in fastest.precision.layers] == ["int8"] * 4
    assert [layer.activations for layer in fastest.precision.layers] == ["int8"] * 4  # int16 costs more too


def test_the_flash_objective_counts_the_constants_the_build_emits(tiny) -> None:
    """Each layer's bytes at each form as the board's build lays them out (the compact stream on the M33's
    optimized backend, the portable arrays on the M0+), and kernel code once per source: two int4 layers of
    one kind pay one kernel, a table brings the int8 kernel it runs."""
    graph = copy.deepcopy(tiny.graph)
    m33, m0 = BoardFlash(load_board("mps2-an505")), BoardFlash(load_board("mps2-an385-m0plus"))
    conv, dw, pw, fc = (graph.ops[i] for i in mixed.layers(graph.ops))
    assert m33.layer_bytes(conv, "int8") == compact.compact_tensor(conv).nbytes
    assert m0.layer_bytes(conv, "int8") == sum(t.nbytes for t in conv.inputs[1:5])
    for op in (conv, dw, fc):
        assert m33.layer_bytes(op, "int4") == (op.inputs[1].numel + 1) // 2 + sum(t.nbytes for t in op.inputs[2:5])
    code = m33.code
    assert m33.code_bytes([(conv, "int4"), (pw, "int4")]) == code["mcu_conv2d_s4"] > 0
    assert m33.code_bytes([(conv, "lut3"), (pw, "int8")]) == \
        code["mcu_conv2d_lut_s8"] + code["mcu_conv2d_s8"] + code["mcu_conv2d_compact_s8"]


def test_a_mixed_build_runs_its_int4_convolutions_as_counted(tiny) -> None:
    """The flash objective counts a 4-bit convolution on its own loops: a mixed build links no packed kernel for
    it and plans it no scratch; asked for packed weights, it widens them into that kernel's stream."""
    flash = BoardFlash(load_board("mps2-an505"))
    chosen = choose_precision(copy.deepcopy(tiny.graph), lambda g: 40.0, Metric("sqnr_db", True), 0.0, "flash", 4,
                              flash)
    graph = copy.deepcopy(tiny.graph)
    layers = mixed.layers(graph.ops)
    assert flash.sources(graph.ops[layers[0]], "int4") == ("mcu_conv2d_s4",)
    for i in layers:
        mixed.apply(graph.ops[i], "int4")
    graph.precision = chosen.precision
    lowered = dataclasses.replace(tiny, quantize=modes.MIXED, graph=graph)
    for packed, streams in ((None, False), (True, True)):
        cm = copy.deepcopy(lowered).compile("mps2-an505", backend_options(packed_weights=packed))
        sources = {Path(k).stem for k in cm.library.kernel_sources}
        assert "mcu_conv2d_s4" in sources and ("mcu_conv2d_packed_s8" in sources) == streams
        conv = next(op for op in cm.graph.ops if op.kind == "conv2d" and op.attrs.get("weight_bits") == 4)
        assert (scratch_bytes(conv) > 0) == streams


def test_the_options_are_refused_by_name() -> None:
    with pytest.raises(McuError, match="needs --accuracy-budget"):
        modes.check_mixed(modes.MIXED, None)
    with pytest.raises(McuError, match="does not apply to --quantize int8"):
        modes.check_mixed(modes.INT8, modes.MixedOptions(1.0))
    with pytest.raises(McuError, match="at least 0"):
        modes.check_mixed(modes.MIXED, modes.MixedOptions(-1.0))
    with pytest.raises(McuError, match="objective"):
        modes.check_mixed(modes.MIXED, modes.MixedOptions(1.0, "speed"))
    modes.check_mixed(modes.MIXED, modes.MixedOptions(0.0))
    modes.check_mixed(modes.INT8, None)


def test_the_command_line_refuses_in_one_line() -> None:
    proc = mcu_in_process("build", str(EXAMPLES / "small_cnn.py"), "--board", "mps2-an505", "--quantize", "mixed")
    assert_one_line_error(proc, "--quantize mixed needs --accuracy-budget")
    proc = mcu_in_process("build", str(EXAMPLES / "small_cnn.py"), "--board", "mps2-an505", "--quantize", "int8",
                          "--accuracy-budget", "2")
    assert_one_line_error(proc, "does not apply to --quantize int8")


def test_with_eval_data_the_score_is_its_metric_in_percent(tiny) -> None:
    """eval_data in the model file: the score is its metric over every sample, in percent (labels here are the
    fp32 model's own top-1, so the int8 graph scores its agreement with fp32)."""
    with torch.no_grad():
        xs = [torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(5)]
        labels = [int(torch.argmax(tiny.spec.model(x))) for x in xs]
    spec = dataclasses.replace(tiny.spec, extras={**tiny.spec.extras, "eval_data": list(zip(xs, labels))})
    score = scorer(spec)
    assert (score.metric, score.sqnr, score.samples) == ("top1", False, 5)
    value = score.score(tiny.graph)
    assert value in {20.0 * k for k in range(6)} and value >= 60
    assert Metric(score.metric, score.sqnr).loss(value, value - 20) == 20
