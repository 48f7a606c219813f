"""``mcu ops``: each ATen op with the IR op kinds it lowers to, the C kernels that run them in fp32
and int8 models (or "fp32 island") and the other backends that take them, read from the lowering's own
tables. These tests check that the listing is derived (every kernel it names is a C file of
runtime_c/kernels, every kind a handler can emit has a kernel, it follows a change of the tables) and that
an op we cannot lower still fails with its name and the user's source line."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from cli_runner import mcu_in_process
from mcu.paths import kernel_source

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows():
    from mcu.commands.ops_listing import op_rows

    return op_rows()


def _mcu(*args: str) -> subprocess.CompletedProcess:
    return mcu_in_process(*args, cwd=ROOT)


def test_the_listing_is_the_frontends_handler_table(rows) -> None:
    from mcu.frontend.lower import supported_ops

    names = [r.aten for r in rows]
    assert len(set(names)) == len(names)
    atens = [n for n in names if n.startswith("aten.")]
    assert len(atens) >= 110
    assert set(atens) == {s for s in supported_ops() if s.startswith("aten.")}
    # besides ATen: the whole recurrent layers as their rewrite exports them (mcu/capture/recurrent.py)
    assert set(names) - set(atens) == {s for s in supported_ops() if s.startswith("mcu_rnn.")}


def test_every_kernel_named_is_a_c_kernel_of_the_runtime(rows) -> None:
    from mcu.commands.ops_listing import ISLAND, NO_CODE, VIEW

    named = {k for r in rows for k in (*r.fp32, *r.int8)} - {ISLAND, NO_CODE, VIEW}
    assert len(named) >= 50
    for k in named:
        assert kernel_source(f"{k}.c").is_file(), k


def test_every_kind_a_handler_emits_has_a_kernel(rows) -> None:
    from mcu.commands.ops_listing import kind_kernels, load_tables

    tables = load_tables()
    kinds = {k for r in rows for k in r.kinds}
    assert {"conv2d", "linear", "unary", "layer_norm", "bmm", "maximum", "remap"} <= kinds
    int8_only = {"lstm", "gru"}  # whole recurrent layers exist in int8 models only (fp32 runs them unrolled)
    w8a16_only = {"lstm_final_cell"}  # an nn.LSTM's c_n: int8 refuses it by name
    for k in kinds - w8a16_only:
        fp32, int8 = kind_kernels(tables, k)
        assert (int8 if k in int8_only else fp32), f"{k}: no kernel"
    assert all((k, "int16") in tables.emitters for k in w8a16_only & kinds)


def test_rows_name_the_kernels_the_emitters_call(rows) -> None:
    by = {r.aten: r for r in rows}
    assert by["aten.gelu.default"].kinds == ("unary",)
    assert by["aten.gelu.default"].fp32 == ("mcu_unary_f32",) and by["aten.gelu.default"].int8 == ("mcu_lut_s8",)
    assert by["aten.add.Tensor"].fp32 == ("mcu_add_f32",) and by["aten.add.Tensor"].int8 == ("mcu_add_s8",)
    assert by["aten.maximum.default"].int8 == ("mcu_maximum_s8",)  # an int8 kernel, not an fp32 island
    assert {"mcu_conv2d_s8", "mcu_conv2d_1x1_s8", "mcu_depthwise_conv2d_s8"} <= set(by["aten.convolution.default"].int8)
    assert "cmsis-nn" in by["aten.convolution.default"].backends
    assert by["aten.argmax.default"].fp32 == ("mcu_argmax_f32",) and by["aten.argmax.default"].int8 == ("mcu_argmax_s8",)
    assert by["aten.view.default"].fp32 == ("view (no code)",)
    assert by["aten.var.correction"].int8 == ("fp32 island",) and by["aten.var.correction"].island


def test_the_listing_follows_the_tables() -> None:
    """Drop a converter or an emitter and the rows change: nothing is written down twice."""
    from mcu.commands.ops_listing import ISLAND, load_tables, op_rows

    tables = load_tables()
    converters = {k: v for k, v in tables.converters.items() if k != "maximum"}
    by = {r.aten: r for r in op_rows(replace(tables, converters=converters))}
    assert by["aten.maximum.default"].int8 == (ISLAND,)
    emitters = {k: v for k, v in tables.emitters.items() if k != ("bmm", "float32")}
    by = {r.aten: r for r in op_rows(replace(tables, emitters=emitters))}
    assert by["aten.bmm.default"].fp32 == ()


def test_mcu_ops_prints_an_aligned_table_and_json() -> None:
    proc = _mcu("ops")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = lines[0]
    assert head.startswith("ATen op") and "fp32 kernels" in head and "int8 kernels" in head
    col = head.index("int8 kernels")
    gelu = next(ln for ln in lines if ln.startswith("aten.gelu.default "))
    assert gelu[col:].startswith("lut_s8")  # aligned under its header
    assert any("aten.var.correction: no TFLite integer semantics" in ln for ln in lines)
    proc = _mcu("ops", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    assert len(data) >= 110 and {"aten", "kinds", "fp32", "int8", "backends", "island"} <= set(data[0])


def test_an_op_we_cannot_lower_still_names_itself_and_the_source_line(tmp_path: Path) -> None:
    f = tmp_path / "cumsum_model.py"
    f.write_text("import torch\n"
                 "class M(torch.nn.Module):\n"
                 "    def forward(self, x):\n"
                 "        return torch.cumsum(x, dim=1) + 1\n"
                 "model = M()\n"
                 "example_inputs = (torch.randn(1, 16),)\n")
    proc = _mcu("build", "--board", "mps2-an505", str(f))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("mcu:"))
    assert "cumsum" in line and "cumsum_model.py:4" in line and "torch.cumsum(x, dim=1)" in line
