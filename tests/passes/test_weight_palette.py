"""Look-up-table weights (``--weight-palette BITS`` with ``--quantize int8`` or ``w8a16``, a table per channel
or per tensor): the palette pass keeps at most 2^BITS values per output channel (or tensor), the emitters'
indices and tables decode to exactly the op's int8 weights, the generated C and the program file on the host
are bit-exact with the Python integer reference (which computes from those weights), only the portable
backend takes the ops, and any other mode is refused by name before anything is compiled."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_runner import assert_one_line_error, mcu_in_process
from mcu.api import CompiledModel, lower_file
from mcu.api import compile as compile_model
from mcu.backends.portable.conv import palette_tensors
from mcu.errors import McuError
from mcu.layouts import channel_rows, unpack_palette
from mcu.ir import Tensor
from mcu.passes.palette import centroids, palettize_row
from mcu.plan.contracts import PALETTE_WHOLE_BYTES
from mcu.plan.memory import scratch_bytes
from mcu.program.host import Program, ProgramError
from mcu.program.methods import compile_methods
from mcu.program.writer import program_from
from mcu.quantize import modes
from mcu.reference.interp import Reference
from repo import EXAMPLES, requires_qemu

WEIGHTED = ("conv2d", "depthwise_conv2d", "linear")


def assert_builds_equal_reference(cm) -> None:
    """The program file and the host C build give the reference's outputs on every test input."""
    assert Reference(cm.graph).exact
    for x in cm.spec.test_inputs:
        want = cm.reference_raw(*x)
        for got in (cm.run_raw(*x), cm.run_raw_c(*x)):
            for g, r in zip(got, want):
                np.testing.assert_array_equal(g, r)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-127, 127), min_size=1, max_size=200), st.sampled_from([2, 3, 4]))
def test_palette_row_keeps_at_most_two_to_the_bits_values(codes, bits):
    row = np.array(codes, dtype=np.int64)
    out = palettize_row(row, bits)
    assert np.unique(out).size <= 1 << bits and out.min() >= -127 and out.max() <= 127
    np.testing.assert_array_equal(out, palettize_row(row, bits))  # deterministic
    if np.unique(row).size <= 1 << bits:
        np.testing.assert_array_equal(out, row)  # nothing to merge: unchanged
    # every code goes to its nearest centroid
    centres = centroids(row, bits)
    np.testing.assert_array_equal(np.abs(out - row), np.abs(centres[None, :] - row[:, None]).min(axis=1))


class _Tiny(torch.nn.Module):
    """A convolution, a depthwise, a pointwise convolution and a linear layer. At the default widths the first
    one's decoded weights exceed PALETTE_WHOLE_BYTES (two channels a pass) and the pointwise one is decoded
    whole."""

    def __init__(self, cin: int = 16, wide: int = 32, narrow: int = 16) -> None:
        super().__init__()
        nn = torch.nn
        self.features = nn.Sequential(nn.Conv2d(cin, wide, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(wide, wide, 3, padding=1, groups=wide), nn.ReLU(),
                                      nn.Conv2d(wide, narrow, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(narrow, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


@pytest.fixture(scope="module")
def tiny() -> CompiledModel:
    torch.manual_seed(0)
    xs = [torch.randn(1, 16, 8, 8) for _ in range(4)]
    return compile_model(_Tiny().eval(), (xs[0],), quantize="int8", calibration=xs,
                         test_inputs=[(x,) for x in xs[:2]], weight_palette=2)


def test_lut_weights_decode_to_the_ops_weights_and_are_bit_exact(tiny) -> None:
    """At 2 bits: C and program equal the reference on the test inputs, the kernels of every path run."""
    cm = tiny
    weighted = [op for op in cm.graph.ops if op.kind in WEIGHTED]
    assert {op.kind for op in weighted} == set(WEIGHTED)
    for op in weighted:
        assert op.attrs["palette_bits"] == 2 and op.attrs["backend"] == "portable", op.name
        rows = channel_rows(op.inputs[1])
        assert max(np.unique(r).size for r in rows) <= 4
        indices, tables = palette_tensors(op)
        np.testing.assert_array_equal(unpack_palette(indices.data, tables.data, 2, *rows.shape), rows)
        if op.kind == "linear":
            assert scratch_bytes(op) == op.inputs[1].shape[1]  # one decoded row
    big = next(op for op in weighted if op.kind == "conv2d" and op.inputs[1].numel > PALETTE_WHOLE_BYTES)
    assert scratch_bytes(big) == 2 * big.inputs[1].numel // big.inputs[1].shape[0]  # two channels a pass
    assert_builds_equal_reference(cm)
    source = "\n".join(cm.library.files.values())
    assert "mcu_conv2d_lut_s8" in source and "mcu_depthwise_conv2d_lut_s8" in source
    assert "mcu_linear_lut_s8" in source
    # the partition report names why the optimized kernels did not take them
    assert any("look-up-table weights" in r.why for r in cm.partitions.refusals)


@pytest.mark.parametrize("mode", ["none", "w4a8", "int8-dynamic"])
def test_other_modes_are_refused_by_name(mode: str) -> None:
    with pytest.raises(McuError, match="--weight-palette needs --quantize int8"):
        modes.check_palette(mode, 3)
    with pytest.raises(McuError, match="2, 3 or 4 bits"):
        modes.check_palette("int8", 5)
    modes.check_palette("int8", 4)
    modes.check_palette(mode, None)


def test_the_api_refuses_before_quantizing() -> None:
    """lower_file (and so compile_file, mcu build/run/eval) checks the mode first: no calibration runs."""
    with pytest.raises(McuError, match="not built for --quantize w4a8"):
        lower_file(EXAMPLES / "small_cnn.py", quantize="w4a8", weight_palette=3)


@pytest.mark.parametrize("mode", ["w4a8", "none", "int8-dynamic"])
def test_the_command_line_refuses_in_one_line(mode: str) -> None:
    proc = mcu_in_process("build", str(EXAMPLES / "small_cnn.py"), "--board", "mps2-an505", "--weight-palette", "3",
                          "--quantize", mode)
    assert_one_line_error(proc, "--weight-palette needs --quantize int8")


def _load_status(blob: bytes) -> int:
    try:
        Program.load(blob)
    except ProgramError as exc:
        return exc.status
    return 0


def test_the_program_loader_checks_the_lut_operands(tiny) -> None:
    """A program whose LUT instruction has one index byte or one table entry too few, or an index width
    outside 2-4, is refused at load (invalid program), not run."""
    cm = tiny
    assert _load_status(cm.program_image().program) == 0
    for kind in ("conv2d", "depthwise_conv2d", "linear"):
        op = next(o for o in cm.graph.ops if o.kind == kind)
        indices, tables = palette_tensors(op)
        short = [(Tensor(indices.name + "_short", (indices.numel - 1,), "uint8", data=indices.data[:-1]), tables),
                 (indices, Tensor(tables.name + "_short", (tables.numel - 1,), "int8", data=tables.data[:-1]))]
        try:
            for pair in short:
                op.attrs["palette_tensors"] = pair
                assert _load_status(cm.program_image().program) == 7, (kind, pair)
            op.attrs["palette_tensors"] = (indices, tables)
            for bits in (1, 5):
                op.attrs["palette_bits"] = bits
                assert _load_status(cm.program_image().program) == 7, (kind, bits)
        finally:
            op.attrs["palette_tensors"], op.attrs["palette_bits"] = (indices, tables), 2
    assert _load_status(cm.program_image().program) == 0


def test_program_export_takes_the_palette() -> None:
    """`mcu export --format program --weight-palette` compiles every method with it (their instructions run
    the LUT kernels)."""
    methods = compile_methods(EXAMPLES / "small_cnn.py", quantize="int8", weight_palette=3)
    kernels = {kernel for _, kernel in program_from(methods).instructions["forward"]}
    assert {"mcu_conv2d_lut_s8", "mcu_linear_lut_s8"} <= kernels, kernels


def _small(quantize: str, per: str, board: str | None = None) -> CompiledModel:
    torch.manual_seed(1)
    xs = [torch.randn(1, 4, 6, 6) for _ in range(4)]
    extra = {} if board is None else {"board": board}
    return compile_model(_Tiny(4, 8, 8).eval(), (xs[0],), quantize=quantize, calibration=xs,
                         test_inputs=[(x,) for x in xs[:2]], weight_palette=modes.PaletteOptions(3, per), **extra)


@pytest.mark.parametrize("quantize,per", [("w8a16", "channel"), ("int8", "tensor")])
def test_w8a16_and_shared_tables_are_bit_exact(quantize: str, per: str) -> None:
    """With int16 activations the 16x8 look-up-table kernels, and with ``per="tensor"`` one table of 2^bits
    values a tensor: the indices and tables decode to the op's weights, the generated C and the program file
    on the host equal the reference."""
    cm = _small(quantize, per)
    suffix = "s16" if quantize == "w8a16" else "s8"
    weighted = [op for op in cm.graph.ops if op.kind in WEIGHTED]
    assert {op.kind for op in weighted} == set(WEIGHTED)
    for op in weighted:
        assert op.attrs["palette_bits"] == 3 and bool(op.attrs.get("palette_shared")) == (per == "tensor")
        rows = channel_rows(op.inputs[1])
        indices, tables = palette_tensors(op)
        assert tables.numel == (8 if per == "tensor" else 8 * rows.shape[0])
        assert np.unique(rows).size <= 8 if per == "tensor" else max(np.unique(r).size for r in rows) <= 8
        np.testing.assert_array_equal(unpack_palette(indices.data, tables.data, 3, *rows.shape), rows)
        if quantize == "w8a16":
            assert op.output.dtype == "int16" and scratch_bytes(op) >= op.inputs[1].numel  # decoded whole
    assert_builds_equal_reference(cm)
    source = "\n".join(cm.library.files.values())
    assert all(f"mcu_{kind}_lut_{suffix}(" in source for kind in WEIGHTED)


def test_the_tensor_kmeans_keeps_at_most_two_to_the_bits_codes() -> None:
    """The k-means over a whole tensor (``--palette-per tensor``) keeps at most 2^bits codes in all,
    deterministically."""
    rows = np.random.default_rng(0).integers(-127, 128, size=(6, 40))
    shared = palettize_row(rows.reshape(-1), 2).reshape(rows.shape)
    assert np.unique(shared).size <= 4
    np.testing.assert_array_equal(shared, palettize_row(rows.reshape(-1), 2).reshape(rows.shape))


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
def test_w8a16_shared_tables_on_the_board() -> None:
    """On mps2-an505 (DSP paths), as generated C and as a program file on the interpreter firmware: every
    output equals the reference."""
    from mcu.program.run_model import run_program_model

    cm = _small("w8a16", "tensor", board="mps2-an505")
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    res = run_program_model(cm)
    assert res.run.passed, res.run.console[-2000:]
