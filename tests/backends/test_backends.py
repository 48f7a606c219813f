"""The backend interface (mcu/backends): the registry, the partitioner by graph shape, the kernel
libraries as backends on the reference models, and no import circle between the emitter and the
backends."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from mcu.backends import registry
from mcu.backends.base import (SPEED_SCRATCH, Backend, Constraint, Context, DelegateRuntime, Partition, Rule,
                               partition)
from mcu.backends.cmsis_nn.options import CmsisNNOptions
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.ir import Graph, Op, Tensor
from repo import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]


# --- a graph and two test backends ---------------------------------------------------------------------------


def _t(name: str, n: int = 8) -> Tensor:
    return Tensor(name, (1, n), "float32")


def chain(kinds: list[str]) -> Graph:
    """x -> kinds[0] -> kinds[1] -> ... -> y, every op elementwise on (1, 8) fp32 (binary ops add a constant)."""
    x = _t("x")
    x.is_input = True
    ops, cur = [], x
    for i, kind in enumerate(kinds):
        out = _t(f"t{i}")
        ins = [cur]
        if kind in ("add", "mul", "sub"):
            ins.append(Tensor(f"c{i}", (1, 8), "float32", data=np.full((1, 8), i + 1, np.float32)))
        ops.append(Op(kind, ins, [out], {}, name=f"{kind}_{i}", source=f"model.py:{10 + i}: y = {kind}(y)"))
        cur = out
    cur.is_output = True
    return Graph([x], [cur], ops)


SMALL = Constraint("more than 4 elements", lambda op: op.output.numel <= 4)


class AddOnly(Backend):
    id: ClassVar[str] = "adds"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("add", ("float32",)),)


class SmallAdds(Backend):
    id: ClassVar[str] = "small-adds"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("add", ("float32",), constraints=(SMALL,)),)


class MulDelegate(Backend):
    id: ClassVar[str] = "muls"
    delegate: ClassVar[bool] = True
    version: ClassVar[int] = 3
    rules: ClassVar[tuple[Rule, ...]] = (Rule("mul", ("float32",)),)
    seen: list[Partition] = []

    def preprocess(self, part: Partition, ctx: Context) -> bytes:
        self.seen.append(part)
        return b"MULS" + self.version.to_bytes(4, "little") + bytes([len(part.ops)])


@pytest.fixture()
def ctx() -> Context:
    return Context(load_board("mps2-an505"), "none", {})


def backends(*names: str, ctx: Context) -> list[Backend]:
    extra = {"adds": AddOnly(), "small-adds": SmallAdds(), "muls": MulDelegate()}
    return [extra[n] if n in extra else registry.backend(n) for n in names]


def by_backend(report) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for b, ops in report.partitions:
        counts[b] = counts.get(b, 0) + len(ops)
    return counts


# --- the partitioner ------------------------------------------------------------------------------------------


def test_each_op_goes_to_the_first_backend_that_takes_it(ctx: Context) -> None:
    g = chain(["add", "sigmoid", "add", "add", "tanh"])
    report = partition(g, backends("adds", "portable", ctx=ctx), ctx)
    assert by_backend(report) == {"adds": 3, "portable": 2}
    assert [b for b, _ in report.partitions] == ["adds", "portable", "adds", "portable"]
    assert report.graph_breaks == 3
    assert [op.attrs["backend"] for op in g.ops] == ["adds", "portable", "adds", "adds", "portable"]
    assert len(g.ops) == 5  # kernel libraries keep every op


def test_preference_order_is_respected(ctx: Context) -> None:
    g = chain(["add", "sigmoid", "add"])
    report = partition(g, backends("portable", "adds", ctx=ctx), ctx)
    assert by_backend(report) == {"portable": 3} and report.graph_breaks == 0
    assert not report.refusals  # portable took everything first


def test_refusals_carry_the_constraint_that_failed(ctx: Context) -> None:
    g = chain(["add", "sigmoid"])
    report = partition(g, backends("small-adds", "portable", ctx=ctx), ctx)
    assert by_backend(report) == {"portable": 2}
    why = {(r.op, r.backend): r.why for r in report.refusals}
    assert why[("add_0", "small-adds")] == "more than 4 elements"
    assert why[("sigmoid_1", "small-adds")] == "no small-adds support for sigmoid"
    assert report.refusals[0].source == "model.py:10: y = add(y)"
    j = report.to_json()
    assert j["graph_breaks"] == 0 and j["partitions"] == [{"backend": "portable", "ops": ["add_0", "sigmoid_1"]}]
    assert {"op": "add_0", "kind": "add", "backend": "small-adds", "why": "more than 4 elements",
            "source": "model.py:10: y = add(y)"} in j["refusals"]


def test_delegate_runs_become_one_delegate_op_each(ctx: Context) -> None:
    MulDelegate.seen.clear()
    g = chain(["mul", "mul", "sigmoid", "mul", "add"])
    first_in, mid = g.ops[0].inputs[0], g.ops[1].output
    report = partition(g, backends("muls", "portable", ctx=ctx), ctx)
    assert [op.kind for op in g.ops] == ["delegate", "sigmoid", "delegate", "add"]
    assert by_backend(report) == {"muls": 3, "portable": 2} and report.graph_breaks == 3
    d = g.ops[0]
    assert d.attrs["backend"] == "muls" and d.attrs["version"] == 3 and d.attrs["ops"] == ["mul_0", "mul_1"]
    assert d.attrs["payload"] == b"MULS" + (3).to_bytes(4, "little") + b"\x02"
    assert d.inputs == [first_in] and d.outputs == [mid]  # the constants stay inside the partition
    assert [len(p.ops) for p in MulDelegate.seen] == [2, 1]
    assert g.ops[2].outputs[0] is g.ops[3].inputs[0]  # the portable add reads the second partition's output


def test_an_op_no_backend_takes_is_one_line_naming_it_and_its_source(ctx: Context) -> None:
    g = chain(["add", "sigmoid"])
    with pytest.raises(McuError) as e:
        partition(g, backends("adds", ctx=ctx), ctx)
    msg = str(e.value)
    assert "sigmoid (sigmoid_1)" in msg and "model.py:11: y = sigmoid(y)" in msg and "\n" not in msg
    assert e.value.hint == "adds: no adds support for sigmoid"


def test_an_unavailable_backend_is_reported_once_and_skipped(ctx: Context) -> None:
    g = chain(["add"])
    report = partition(g, backends("cmsis-nn", "portable", ctx=ctx), ctx)
    assert by_backend(report) == {"portable": 1}
    assert [(r.op, r.backend) for r in report.refusals] == [("*", "cmsis-nn")]
    assert "CMSIS_NN_PATH" in report.refusals[0].why


# --- the registry ---------------------------------------------------------------------------------------------


def test_registry_resolves_a_preference_order(ctx: Context) -> None:
    # the user's custom kernels last: they take only custom ops, which nothing else takes
    assert [b.id for b in registry.resolve(None, ctx)] == ["optimized", "portable", "custom"]
    with_cmsis = Context(ctx.board, "int8", {"cmsis-nn": CmsisNNOptions(Path("/somewhere"))})
    assert registry.default_order(with_cmsis) == ["cmsis-nn", "optimized", "portable"]
    assert [b.id for b in registry.resolve(["optimized"], ctx)] == ["optimized", "portable", "custom"]  # appended
    assert registry.parse("cmsis-nn, optimized,portable") == ["cmsis-nn", "optimized", "portable"]
    assert registry.parse(["portable"]) == ["portable"] and registry.parse(None) is None
    assert "xnnpack" in registry.known()
    with pytest.raises(McuError, match="unknown backend 'nope'") as e:
        registry.resolve(["nope"], ctx)
    assert "cmsis-nn, custom, optimized, portable, xnnpack" in (e.value.hint or "")
    with pytest.raises(McuError, match="listed twice"):
        registry.resolve(["portable", "portable"], ctx)
    with pytest.raises(McuError, match="empty backend list"):
        registry.parse(" , ")


def test_every_registered_kernel_library_declares_its_support_as_data() -> None:
    for name in ("portable", "optimized", "cmsis-nn"):
        cls = registry.backend_class(name)
        assert cls.id == name and not cls.delegate and cls.rules
        assert all(isinstance(r, Rule) for r in cls.rules)


# --- the kernel libraries on the reference models -------------------------------------------------------------


def test_default_order_on_a_dsp_core_and_on_a_plain_core(compiled) -> None:
    cm = compiled("small_cnn", "mps2-an505", "int8")
    taken = {op.name: op.attrs["backend"] for op in cm.graph.ops}
    assert {taken[op.name] for op in cm.graph.ops if op.kind in ("conv2d", "linear")} == {"optimized"}
    # the global average pool too (its SXTAB16 kernel); the 2x2 max pool and the rest are portable's, and a
    # view (no code) stays with the backend of the op before it
    assert {taken[op.name] for op in cm.graph.ops if op.kind == "mean_hw"} == {"optimized"}
    assert {taken[op.name] for op in cm.graph.ops
            if op.kind not in ("conv2d", "linear", "mean_hw") and not op.attrs.get("alias")} == {"portable"}
    packed = [s.call.function for s in cm.library.view.steps if s.call.function == "mcu_conv2d_packed_s8"]
    assert len(packed) == sum(1 for op in cm.graph.ops if op.kind in ("conv2d", "linear"))
    cm3 = compiled("small_cnn", "mps2-an385", "int8")
    assert {op.attrs["backend"] for op in cm3.graph.ops} == {"portable"}
    assert [r.why for r in cm3.partitions.refusals if r.backend == "optimized"] == ["cortex-m3 has no DSP extension"]


def test_backend_option_and_report_through_the_api_and_cli(capsys) -> None:
    from mcu.api import compile_file
    from mcu.commands.cli import build_parser
    from mcu.commands.reports import print_partitions

    cm = compile_file(EXAMPLES / "small_cnn.py", board="mps2-an505", quantize="int8", backend="portable")
    assert {op.attrs["backend"] for op in cm.graph.ops} == {"portable"}
    assert "mcu_conv2d_packed_s8" not in cm.library.files[f"{cm.library.prefix}_model.c"]
    print_partitions(cm.partitions)
    out = capsys.readouterr().out
    assert "portable" in out and "graph breaks: 0" in out
    args = build_parser().parse_args(["run", str(EXAMPLES / "small_cnn.py"), "-b", "mps2-an505",
                                      "--backend", "optimized,portable"])
    assert args.backend == "optimized,portable"
    with pytest.raises(McuError, match="unknown backend 'bogus'"):
        compile_file(EXAMPLES / "small_cnn.py", board="mps2-an505", quantize="int8", backend=["bogus"])


def test_cli_rejects_an_unknown_backend_in_one_line() -> None:
    from cli_runner import mcu_in_process

    proc = mcu_in_process("build", str(EXAMPLES / "small_cnn.py"), "-b", "mps2-an505", "--backend", "bogus,portable")
    assert proc.returncode != 0
    assert "unknown backend 'bogus'" in proc.stderr and "Traceback" not in proc.stderr


# --- no import circle between the emitter and the backends ----------------------------------------------------


def _module_imports(path: Path) -> set[str]:
    """Modules a file imports at load time (not inside functions, not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else []:
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names}
            elif isinstance(sub, ast.ImportFrom) and sub.module:
                found.add(sub.module)
                found |= {f"{sub.module}.{a.name}" for a in sub.names}
    return found


# What the emitter (and the device tools) may know of the backends: the interface, never a backend's package.
INTERFACE = ("mcu.backends.base", "mcu.backends.registry", "mcu.backends.calls")


def test_emitter_and_backends_do_not_import_each_other_at_load_time() -> None:
    for path in sorted((ROOT / "mcu" / "emit").glob("*.py")):
        bad = {m for m in _module_imports(path) if m.startswith("mcu.backends") and not m.startswith(INTERFACE)}
        assert not bad, f"{path.name} imports {bad} at load time (ask mcu.backends.registry inside a function)"
    for path in sorted((ROOT / "mcu" / "backends").rglob("*.py")):
        bad = {m for m in _module_imports(path) if m.startswith(("mcu.emit.kernels", "mcu.emit.c_model"))}
        assert not bad, f"{path.name} imports the emitter ({bad}); shared pieces live in mcu/backends/calls.py"
    calls = ROOT / "mcu" / "backends" / "calls.py"
    assert not {m for m in _module_imports(calls) if m.startswith(("mcu.emit", "mcu.backends"))}


@pytest.mark.parametrize("module", ["mcu.emit.kernels", "mcu.emit.c_model", "mcu.backends.portable.core",
                                    "mcu.backends.optimized.core", "mcu.backends.cmsis_nn.core", "mcu.backends.registry"])
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    code = (f"import sys, {module}\n"
            "emit = {m for m in sys.modules if m in ('mcu.emit.kernels', 'mcu.emit.c_model')}\n"
            "libs = {m for m in sys.modules if m.startswith('mcu.backends.') and m not in "
            f"{INTERFACE}}}\n"
            "print(sorted(emit), sorted(libs))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    emit, libs = out.strip().split("] [")
    if module.startswith("mcu.emit"):
        assert libs.strip("[]") == "", f"{module} loaded backends: {libs}"
    else:
        assert emit.strip("[]") == "", f"{module} loaded the emitter: {emit}"


# --- backends own their options and their C ---------------------------------------------------------------------


def _cmsis_tree(root: Path) -> Path:
    (root / "Include").mkdir(parents=True)
    (root / "Include" / "arm_nnfunctions.h").write_text("")
    (root / "Source").mkdir()
    return root


def test_the_api_keywords_become_the_backends_own_options(tmp_path: Path, ctx: Context) -> None:
    from mcu.api import backend_options
    from mcu.backends.optimized.options import OptimizedOptions

    tree = _cmsis_tree(tmp_path / "cmsis")
    assert backend_options() == {}
    assert backend_options(cmsis_nn=tree, packed_weights=False) == {"cmsis-nn": CmsisNNOptions(tree.resolve()),
                                                                    "optimized": OptimizedOptions(False)}
    with_tree = Context(ctx.board, "int8", backend_options(cmsis_nn=str(tree)))
    assert registry.default_order(with_tree) == ["cmsis-nn", "optimized", "portable"]
    assert registry.backend("cmsis-nn").unavailable(with_tree) is None
    assert "no CMSIS-NN sources" in (registry.backend("cmsis-nn").unavailable(ctx) or "")
    with pytest.raises(McuError, match="not a CMSIS-NN source tree"):
        backend_options(cmsis_nn=tmp_path)


def test_the_optimized_backend_settles_its_weight_layout_on_the_graph(ctx: Context) -> None:
    from mcu.backends.optimized.options import OptimizedOptions

    optimized = registry.backend("optimized")
    assert optimized.settle(chain(["add"]), ctx) == OptimizedOptions(packed_weights=True, chosen_for_board=True)  # room
    compact = Context(ctx.board, "int8", {"optimized": OptimizedOptions(packed_weights=False)})
    assert optimized.settle(chain(["add"]), compact) == OptimizedOptions(packed_weights=False)


class MulsWithC(MulDelegate):
    runtime: ClassVar[DelegateRuntime | None] = DelegateRuntime(
        "mcu_muls_backend", "mcu/delegate_muls.h", ("backends/muls/mcu_muls.c",), ("-lmuls",))


class DefiningAdds(Backend):
    """Adds through the portable kernel, with a compile definition counting them."""

    id: ClassVar[str] = "defining-adds"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("add", ("float32",)),)

    def emit(self, op: Op, refs: object) -> object:
        return registry.backend("portable").emit(op, refs)

    def kernel_defines(self, calls) -> dict[str, int]:  # type: ignore[no-untyped-def]
        return {"MCU_TEST_ADDS": len(calls)}


@pytest.fixture()
def registered(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Backends of this module joined to the registry by id, as a package of mcu's would be."""
    def join(*classes: type[Backend]) -> None:
        for cls in classes:
            monkeypatch.setitem(registry.BACKENDS, cls.id, f"{__name__}:{cls.__name__}")
    yield join
    registry.backend_class.cache_clear()


def test_the_emitter_takes_a_delegates_c_runtime_from_its_backend(registered, ctx: Context) -> None:
    from mcu.emit.delegates import runtime_for
    from mcu.pipeline import compile_graph

    registered(MulsWithC)
    assert runtime_for("xnnpack", "p0") is registry.backend_class("xnnpack").runtime
    _, lib, _ = compile_graph(chain(["mul", "add"]), ctx.board, "none", ["muls"])
    model_c = lib.files[f"{lib.prefix}_model.c"] + lib.files[f"{lib.prefix}_model.h"]
    assert '#include "mcu/delegate_muls.h"' in model_c and "&mcu_muls_backend" in model_c
    assert "backends/muls/mcu_muls.c" in lib.runtime_sources and lib.libraries == ["-lmuls"]
    with pytest.raises(McuError, match="no C runtime for delegate backend 'adds'") as e:
        runtime_for("adds", "p0")
    assert "xnnpack" in (e.value.hint or "")


def test_the_emitter_asks_each_backend_for_its_kernel_definitions(registered, ctx: Context) -> None:
    from mcu.emit.kernels import merge_defines
    from mcu.pipeline import compile_graph

    registered(DefiningAdds)
    _, lib, _ = compile_graph(chain(["add", "tanh", "add"]), ctx.board, "none", ["defining-adds"])
    assert lib.defines == {"MCU_TEST_ADDS": 2} and lib.define_flags() == ["-DMCU_TEST_ADDS=2"]
    assert lib.view.backend_defines == {"defining-adds": {"MCU_TEST_ADDS": 2}}
    assert merge_defines([{"defining-adds": {"MCU_TEST_ADDS": 2}}, {}]) == {"MCU_TEST_ADDS": 2}
    with pytest.raises(ValueError, match="MCU_TEST_ADDS=2 and MCU_TEST_ADDS=1"):
        merge_defines([{"defining-adds": {"MCU_TEST_ADDS": 2}}, {"defining-adds": {"MCU_TEST_ADDS": 1}}])


def test_the_op_listing_asks_the_registry(registered) -> None:
    from mcu.commands.ops_listing import load_tables

    registered(AddOnly)
    backends = load_tables().backends
    assert set(backends) == {"adds", "cmsis-nn", "optimized", "xnnpack"}  # not the fallback, not custom kernels
    assert backends["adds"] == {("add", "float32")}


def test_emitter_and_device_reach_backends_only_through_the_interface() -> None:
    """No module of mcu/emit or mcu/device imports a backend's package (anywhere, in functions too): a
    backend's options, C runtime and kernel definitions reach them through mcu/backends/base.py's
    interface and the registry."""
    allowed = INTERFACE
    for folder in ("emit", "device"):
        for path in sorted((ROOT / "mcu" / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = ([f"{node.module}.{a.name}" for a in node.names] if node.module == "mcu.backends"
                             else [node.module])
                else:
                    continue
                bad = [n for n in names if n.startswith("mcu.backends") and not n.startswith(allowed)]
                assert not bad, f"{path.relative_to(ROOT)} imports {bad}: ask mcu.backends.registry"


def _conv_s8(cin: int, cout: int, k: int, shift: int = -3, act: tuple[int, int] = (-128, 127)) -> Op:
    """An int8 convolution op as the portable backend takes it (weights OIHW, per-channel shifts)."""
    w = np.ones((cout, cin, k, k), np.int8)
    consts = [Tensor("b", (cout,), "int32", data=np.zeros(cout, np.int32)),
              Tensor("m", (cout,), "int32", data=np.full(cout, 1 << 30, np.int32)),
              Tensor("s", (cout,), "int32", data=np.full(cout, shift, np.int32))]
    return Op("conv2d", [Tensor("x", (1, cin, 8, 8), "int8"), Tensor("w", w.shape, "int8", data=w), *consts],
              [Tensor("y", (1, cout, 8, 8), "int8")],
              {"stride": (1, 1), "padding": (k // 2, k // 2), "dilation": (1, 1), "groups": 1,
               "input_offset": 0, "output_offset": 0, "act_min": act[0], "act_max": act[1]})


def test_helium_three_pixel_layers_whose_rows_overflow_the_stack_copy_ask_for_their_weights_scratch() -> None:
    """On a Helium core the portable backend plans a scratch of all weights for a layer of mcu_mve_conv3
    whose rows do not fit its stack copy (ResNet-8's 32- and 64-channel 3x3 layers); not for a layer whose
    rows fit, another path's layer (a narrower clamp, a left shift, 1x1) or another core."""
    portable = registry.backend("portable")
    m55 = Context(load_board("mps3-an547"), "int8", {})
    m33 = Context(load_board("mps2-an505"), "int8", {})
    cases = [(_conv_s8(64, 64, 3), m55, 64 * 9 * 64), (_conv_s8(32, 32, 3), m55, 32 * 9 * 32),
             (_conv_s8(16, 16, 3), m55, 0), (_conv_s8(64, 64, 3, shift=1), m55, 0),
             (_conv_s8(64, 64, 3, act=(-100, 127)), m55, 0), (_conv_s8(64, 64, 1), m55, 0),
             (_conv_s8(64, 64, 3), m33, 0)]
    for op, ctx, want in cases:
        portable.take(op, ctx)
        assert int(op.attrs.get("scratch_bytes", 0)) == want, (op.inputs[1].shape, ctx.board.name)
        assert op.attrs.get(SPEED_SCRATCH, False) == (want > 0)  # a build that must save RAM drops it
