"""User custom ops: examples/custom_op.py (squareplus, the user's own C kernels) runs on the
simulated boards at fp32 and int8 and through a program file on the host; the error cases name the op;
a build without the op links none of its code."""

from __future__ import annotations

import shutil
import struct
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_runner import assert_one_line_error, mcu_in_process
from mcu.api import compile_file
from mcu.device.elf import read_elf
from mcu.errors import McuError
from mcu.program.host import Program
from repo import EXAMPLES, requires_qemu

NAME = "custom_op"


@requires_qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_example_on_the_simulated_board(compiled, board: str, quantize: str) -> None:
    cm = compiled(NAME, board, quantize)
    assert [op.kind for op in cm.graph.ops].count("custom") == 2
    assert all(op.attrs["backend"] == "custom" for op in cm.graph.ops if op.kind == "custom")
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    for v, x in enumerate(cm.spec.test_inputs):
        if quantize == "int8":
            # zero differences from the Python reference (the registered integer reference for the custom op)
            assert cm.reference_is_exact
            for got, want in zip(run.outputs_raw[v], cm.reference_raw(*x)):
                assert np.array_equal(np.asarray(got).reshape(-1), want.reshape(-1))
        else:
            eager = cm.eager_outputs[v]
            for got, want in zip(run.outputs[v], eager):
                assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_example_through_a_program_file_on_the_host(compiled, quantize: str) -> None:
    cm = compiled(NAME, "mps2-an505", quantize)
    program = cm.runtime_program()  # the in-process interpreter with the user's kernels registered
    assert program.custom is not None and len(program.custom.functions) == 1
    for x in cm.spec.test_inputs:
        got = program.method("forward").run_raw(*cm.encode_inputs(x))
        assert all(np.array_equal(a, b) for a, b in zip(got, cm.run_raw_c(*x)))  # == the generated C (child)
        if quantize == "int8":
            assert all(np.array_equal(a, b) for a, b in zip(got, cm.reference_raw(*x)))
    # Without the kernels the program is refused before the interpreter sees it, saying what to pass
    with pytest.raises(McuError, match=r"calls custom kernels \(squareplus_(s8|f32)\): pass custom= the model file"):
        Program.load(cm.program_image().program)


def test_a_build_without_the_op_links_none_of_its_code(compiled) -> None:
    with_op = read_elf(compiled(NAME, "mps2-an505", "int8").build().elf)
    assert with_op.symbol("squareplus_s8") is not None
    assert with_op.symbol("squareplus_f32") is None  # only the dtype the build calls
    without = read_elf(compiled("small_cnn", "mps2-an505", "int8").build().elf)
    for name in ("squareplus_s8", "squareplus_f32", "mcu_custom_run", "mcu_custom_init"):
        assert without.symbol(name) is None


def _model(tmp_path: Path, op: str, register: bool, kernel: str = "relu_ish.c", body: str | None = None) -> Path:
    """A model with custom op ``mcu_test::<op>`` (a clamped identity in Python), registered or not."""
    (tmp_path / kernel).write_text(body if body is not None else textwrap.dedent("""\
        #include "mcu/custom.h"
        mcu_status relu_ish(const mcu_custom_call *call);
        mcu_status relu_ish(const mcu_custom_call *call)
        {
            const float *x = (const float *)call->inputs[0];
            float *y = (float *)call->output;
            for (int32_t i = 0; i < call->params->numel; ++i) {
                y[i] = x[i] > 0.0f ? x[i] : 0.0f;
            }
            return MCU_OK;
        }
        """))
    registration = textwrap.dedent(f"""\
        custom_ops = [mcu.custom_op("mcu_test::{op}", fp32=("relu_ish", "{kernel}"),
                                    reference=lambda xs, args: np.maximum(xs[0], 0).astype(np.float32))]
        """) if register else ""
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(f"""\
        import numpy as np
        import torch
        import mcu

        @torch.library.custom_op("mcu_test::{op}", mutates_args=())
        def my_op(x: torch.Tensor) -> torch.Tensor:
            return torch.clamp(x, min=0.0)

        @my_op.register_fake
        def _(x):
            return torch.empty_like(x)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                return my_op(self.fc(x))

        """) + registration + textwrap.dedent("""\
        model = Net().eval()
        example_inputs = (torch.randn(1, 8),)
        calibration = [(torch.randn(1, 8),) for _ in range(8)]
        """))
    return path


def test_an_unregistered_custom_op_is_named_with_how_to_register_it(tmp_path: Path) -> None:
    path = _model(tmp_path, "unregistered", register=False)
    with pytest.raises(McuError) as err:
        compile_file(path, board="mps2-an505")
    assert err.value.message == "custom op mcu_test::unregistered is not registered with mcu at model.py:19: " \
                                "`return my_op(self.fc(x))`"
    assert err.value.hint == ('list it in the model file: custom_ops = [mcu.custom_op("mcu_test::unregistered", '
                              'fp32=("my_fn", "my_op.c"), reference=my_numpy_reference)] (see examples/custom_op.py)')
    proc = mcu_in_process("build", "--board", "mps2-an505", str(path))
    assert_one_line_error(proc, "custom op mcu_test::unregistered is not registered with mcu at model.py:19")


def test_a_kernel_that_does_not_compile_shows_the_compiler_message(tmp_path: Path) -> None:
    bad = textwrap.dedent("""\
        #include "mcu/custom.h"
        mcu_status relu_ish(const mcu_custom_call *call);
        mcu_status relu_ish(const mcu_custom_call *call)
        {
            int unused;
            return call->params->no_such_field;
        }
        """)
    path = _model(tmp_path, "broken", register=True, body=bad)
    with pytest.raises(McuError) as err:
        compile_file(path, board="mps2-an505")
    lines = err.value.message.splitlines()
    assert lines[0] == "custom op mcu_test::broken: its C source does not compile:"
    source = tmp_path / "relu_ish.c"
    assert any(ln.startswith(f"{source}:6:") and "has no member named 'no_such_field'" in ln for ln in lines[1:]), lines
    assert any(ln.startswith(f"{source}:5:") and "unused variable 'unused'" in ln for ln in lines[1:]), lines


def test_a_kernel_that_differs_from_its_reference_fails_mcu_run_naming_the_op(tmp_path: Path) -> None:
    wrong = textwrap.dedent("""\
        #include "mcu/custom.h"
        mcu_status relu_ish(const mcu_custom_call *call);
        mcu_status relu_ish(const mcu_custom_call *call)
        {
            const float *x = (const float *)call->inputs[0];
            float *y = (float *)call->output;
            for (int32_t i = 0; i < call->params->numel; ++i) {
                y[i] = x[i] > 0.0f ? x[i] : 0.01f * x[i]; /* a leaky ReLU: not what the reference says */
            }
            return MCU_OK;
        }
        """)
    path = _model(tmp_path, "wrong", register=True, body=wrong)
    with pytest.raises(McuError) as err:
        compile_file(path, board="mps2-an505")
    message = err.value.message
    assert message.startswith("custom op mcu_test::wrong (wrong) (model.py:19: `return my_op(self.fc(x))`): "
                              "its C kernel relu_ish differs from its Python reference in ")
    proc = mcu_in_process("run", "--board", "mps2-an505", str(path))
    assert_one_line_error(proc, "custom op mcu_test::wrong (wrong)", "differs from its Python reference")


def test_registration_errors_are_clear(tmp_path: Path) -> None:
    import mcu

    with pytest.raises(McuError, match="must be 'namespace::op'"):
        mcu.custom_op("squareplus", fp32=("f", "x.c"))
    with pytest.raises(McuError, match="needs its Python reference"):
        mcu.custom_op("a::b", fp32=("f", str(EXAMPLES / "custom_op" / "squareplus.c")))
    with pytest.raises(McuError, match="does not exist"):
        mcu.custom_op("a::b", fp32=("f", "no_such_file.c"), reference=lambda xs, args: xs[0])
    shutil.copy(EXAMPLES / "custom_op" / "squareplus.c", tmp_path / "k.c")
    reg = mcu.custom_op("a::b", fp32=("f", tmp_path / "k.c"), reference=lambda xs, args: xs[0])
    with pytest.raises(McuError, match="registered twice"):
        mcu.compile(__import__("torch").nn.Identity(), (__import__("torch").zeros(1),), custom_ops=[reg, reg])


@requires_qemu
def test_an_op_without_an_int8_kernel_stays_fp32_in_an_int8_model(tmp_path: Path) -> None:
    # Registered with an fp32 kernel only: the quantizer leaves it unannotated, so it runs in fp32 between
    # a dequantize and a quantize, and the lowering names it among the fp32 fallbacks.
    cm = compile_file(_model(tmp_path, "island", register=True), board="mps2-an505", quantize="int8")
    custom = [op for op in cm.graph.ops if op.kind == "custom"]
    assert len(custom) == 1 and custom[0].output.dtype == "float32"
    assert any(what.startswith("custom island") for what, _ in cm.graph.fallbacks), cm.graph.fallbacks
    assert {op.kind for op in cm.graph.ops} >= {"linear", "dequantize", "custom"}  # the fp32 result is the model output
    run = cm.simulate()
    assert run.passed, run.console[-1500:]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(in_scale=st.floats(1e-3, 0.5), out_scale=st.floats(1e-3, 0.5), in_zp=st.sampled_from([-128, -1, 0, 5, 127]),
       out_zp=st.sampled_from([-128, 0, 127]), b=st.floats(0.0, 8.0), n=st.integers(1, 300), seed=st.integers(0, 999))
def test_example_int8_kernel_equals_its_reference(compiled, in_scale, out_scale, in_zp, out_zp, b, n, seed) -> None:
    # The example's C kernel through the host library, against its integer reference: every input code
    # (-128 and 127 included), zero-points at the ends, saturating output scales.
    from mcu.capture.custom_ops import CustomQuant
    from mcu.device.custom_host import build_host_kernels

    cm = compiled(NAME, "mps2-an505", "int8")
    host = build_host_kernels(cm.graph)
    reg = next(op.attrs["custom"] for op in cm.graph.ops if op.kind == "custom")
    x = np.random.default_rng(seed).integers(-128, 128, size=n, dtype=np.int8)
    x[: min(n, 2)] = [-128, 127][: min(n, 2)]
    f = np.float32
    params = struct.pack("<3i6i4i4f4ifii8fi", 1, n, 1, n, 1, 1, 1, 1, 1, n, 0, 0, 0, f(in_scale), 1, 1, 1,
                         in_zp, 0, 0, 0, f(out_scale), out_zp, 1, f(b), *[0.0] * 7, 256)
    out = np.zeros(n, np.int8)
    assert host.call("squareplus_s8", params, [x], out, 256) == 0
    want = reg.reference_int8([x], (b,), CustomQuant((in_scale,), (in_zp,), out_scale, out_zp))
    assert np.array_equal(out, want)
