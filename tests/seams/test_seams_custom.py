"""Custom C kernels where they meet the rest: a kernel that strays outside its output is named (kernel,
tensor, byte offset, source line) by the host check, which runs the user's C in a sanitized child process,
so mcu itself never crashes; the firmware's test harness guards the arena around every custom call; program
files with custom ops load and run given the model file. The kernels are tests/data/custom_seams/kernels.c,
one deliberate bug each."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cli_runner import assert_one_line_error, mcu_in_process
from mcu.api import compile_file
from mcu.errors import McuError
from repo import requires_qemu

KERNELS = Path(__file__).parents[1] / "data" / "custom_seams" / "kernels.c"
HINT = "writes numel elements of its output"


def seam_model(tmp_path: Path, bug: int = 0, over: int = 1, int8: bool = False, width: int = 8) -> Path:
    """A model file whose op ``seam::op<bug>`` runs kernels.c built with that bug (0: none): a ReLU at fp32,
    a copy at int8, between two Linear layers."""
    name = f"op{bug}_{over}{'_s8' if int8 else ''}"
    (tmp_path / f"{name}.c").write_text(f"#define SEAM_BUG {bug}\n#define SEAM_OVER {over}\n#include \"{KERNELS}\"\n")
    if int8:
        registration = (f'int8=("seam_copy_s8", "{name}.c"), reference_int8=lambda xs, args, q: xs[0].copy(), '
                        'int8_output="input"')
        body = "torch.clamp(x, min=-1e9)"  # eager: a copy
    else:
        registration = (f'fp32=("seam_relu", "{name}.c"), '
                        'reference=lambda xs, args: np.maximum(xs[0], 0).astype(np.float32)')
        body = "torch.clamp(x, min=0.0)"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(f"""\
        import numpy as np
        import torch
        import mcu

        torch.manual_seed(0)

        @torch.library.custom_op("seam::{name}", mutates_args=())
        def seam(x: torch.Tensor) -> torch.Tensor:
            return {body}

        @seam.register_fake
        def _(x):
            return torch.empty_like(x)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear({width}, {width})
                self.fc2 = torch.nn.Linear({width}, 4)

            def forward(self, x):
                return self.fc2(seam(self.fc1(x)))

        custom_ops = [mcu.custom_op("seam::{name}", {registration})]
        model = Net().eval()
        example_inputs = (torch.randn(1, {width}),)
        calibration = [(torch.randn(1, {width}),) for _ in range(8)]
        test_inputs = [(torch.randn(1, {width}),) for _ in range(2)]
        """))
    return path


def check_error(path: Path, quantize: str = "none") -> str:
    with pytest.raises(McuError) as err:
        compile_file(path, board="mps2-an505", quantize=quantize)
    assert any(h in (err.value.hint or "") for h in (HINT, "UBSan", "does not end")), err.value.hint
    return err.value.message


@pytest.mark.parametrize("over", [1, 256])
def test_an_overrun_is_named_by_the_host_check(tmp_path: Path, over: int) -> None:
    message = check_error(seam_model(tmp_path, bug=1, over=over))
    assert message.startswith(f"custom op seam::op1_{over} (op1_{over}) (op1_{over}.py:22: "), message
    assert message.endswith("its C kernel seam_relu writes outside its output: 4 B at byte offset 32 of its "
                            f"output op1_{over}, which is 32 B long (just after its end) at kernels.c:25"), message


def test_an_int8_overrun_is_named_by_the_host_check(tmp_path: Path) -> None:
    message = check_error(seam_model(tmp_path, bug=1, over=256, int8=True), quantize="int8")
    assert message.endswith("its C kernel seam_copy_s8 writes outside its output: 1 B at byte offset 8 of its "
                            "output op1_256_s8, which is 8 B long (just after its end) at kernels.c:64"), message


@pytest.mark.parametrize(("bug", "tail"), [
    (2, "writes outside its output: 4 B at byte offset -4 of its output op2_1, which is 32 B long "
        "(4 B before its start) at kernels.c:28"),
    (3, "writes outside its output: the first changed byte is at byte offset 4 of its input addmm, "
        "which is 32 B long"),
    (4, "reads outside its inputs: 4 B at byte offset 32 of its input addmm, which is 32 B long "
        "(just after its end) at kernels.c:32"),
    (5, "has undefined behaviour at kernels.c:36: signed integer overflow: 2147483645 + 8 cannot be represented "
        "in type 'int'"),
    (6, "crashed on the host (SEGV at address 0x000000000040) at kernels.c:39"),
])
def test_other_strays_are_named(tmp_path: Path, bug: int, tail: str) -> None:
    message = check_error(seam_model(tmp_path, bug=bug))
    assert message.startswith(f"custom op seam::op{bug}_1 (op{bug}_1) "), message
    assert message.endswith(f"its C kernel seam_relu {tail}"), message


def test_a_kernel_that_never_returns_is_named(tmp_path: Path, monkeypatch) -> None:
    import mcu.device.custom_check as check

    monkeypatch.setattr(check, "TIMEOUT_S", 3.0)
    message = check_error(seam_model(tmp_path, bug=8))
    assert message.endswith("its C kernel seam_relu did not return within 3 s on the host"), message


def test_without_sanitizers_the_guards_still_name_the_overrun(tmp_path: Path, monkeypatch) -> None:
    # A host compiler without ASan: the check's guard zones hold a pattern that is compared after the call.
    import mcu.device.custom_check as check

    plain = check.check_kernels
    monkeypatch.setattr(check, "check_kernels", lambda graph: plain(graph, sanitize=False))
    message = check_error(seam_model(tmp_path, bug=1, over=256))
    assert message.endswith("its C kernel seam_relu writes outside its output: the first changed byte is at byte "
                            "offset 32 of its output op1_256, which is 32 B long (just after its end)"), message


def test_the_cli_names_the_overrun_and_never_crashes(tmp_path: Path) -> None:
    for command, over in (("run", 1), ("debug", 256)):
        proc = mcu_in_process(command, "--board", "mps2-an505", str(seam_model(tmp_path, bug=1, over=over)))
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert_one_line_error(proc, f"custom op seam::op1_{over}", "its C kernel seam_relu writes outside its output",
                              "byte offset 32 of its output", "kernels.c:25")


def test_a_correct_kernel_passes_the_check(tmp_path: Path) -> None:
    cm = compile_file(seam_model(tmp_path, bug=0), board="mps2-an505")
    assert [op.kind for op in cm.graph.ops].count("custom") == 1


def _skip_host_check(monkeypatch) -> None:
    """The firmware's own guards are shown on kernels the host check would have refused first."""
    import mcu.device.custom_check as check

    monkeypatch.setattr(check, "check_kernels", lambda graph: None)


@requires_qemu
@pytest.mark.parametrize(("over", "int8", "tail"), [
    (1, False, "the first changed byte is at byte offset 32 of its output op1_1, which is 32 B long (just after its "
               "end), in tensor addmm (live at this op, byte 0 of 32); the changed bytes span 4 B of the 64 B guarded"),
    (256, True, "the first changed byte is at byte offset 8 of its output op1_256_s8, which is 8 B long (just after "
                "its end), in tensor addmm (live at this op, byte 0 of 8); the changed bytes span 32 B of the 64 B "
                "guarded"),
])
def test_the_test_firmware_guards_name_an_overrun(tmp_path: Path, monkeypatch, over: int, int8: bool,
                                                  tail: str) -> None:
    # Before the guards, the one-element overrun wrote over the op's own input in the arena and `mcu run` said PASS.
    _skip_host_check(monkeypatch)
    cm = compile_file(seam_model(tmp_path, bug=1, over=over, int8=int8), board="mps2-an505",
                      quantize="int8" if int8 else "none")
    with pytest.raises(McuError) as err:
        cm.simulate()
    kernel = "seam_copy_s8" if int8 else "seam_relu"
    assert err.value.message.endswith(f"its C kernel {kernel} writes outside its output on mps2-an505: {tail}"), \
        err.value.message
    if int8:  # mcu debug runs the same guards in its traced firmware
        from mcu.devtools.debug import debug_model

        with pytest.raises(McuError, match=f"its C kernel {kernel} writes outside its output on mps2-an505"):
            debug_model(cm)


def test_the_host_boards_harness_guards_name_an_overrun(tmp_path: Path, monkeypatch) -> None:
    # `mcu run --board host` runs the same harness as a native executable, with the same guards. The 256 B
    # overrun also runs over the statics after the arena: the saved bytes are on the stack, out of its way.
    from mcu.device.sim.linux import expectations, run_on_linux

    _skip_host_check(monkeypatch)
    cm = compile_file(seam_model(tmp_path, bug=1, over=256, int8=True), board="host", quantize="int8")
    with pytest.raises(McuError, match="its C kernel seam_copy_s8 writes outside its output on host: the first "
                                       "changed byte is at byte offset 8 of its output op1_256_s8"):
        run_on_linux(cm, *expectations(cm))


@requires_qemu
def test_a_correct_kernel_passes_its_guards_and_the_release_has_none(tmp_path: Path) -> None:
    from mcu.device.elf import read_elf
    from mcu.emit.c_model import GUARD_BYTES, GUARD_DEFINE
    from mcu.commands.export import export_library

    cm = compile_file(seam_model(tmp_path, bug=0, int8=True), board="mps2-an505", quantize="int8")
    run = cm.simulate()
    assert run.passed, run.console[-1500:]
    prefix = cm.library.prefix
    arena = cm.library.view.arenas[0]
    guarded = read_elf(cm.build().elf).symbol(f"{arena.symbol}_guarded")  # the test firmware's arena
    assert guarded is not None and guarded.size == arena.size + 2 * GUARD_BYTES
    # The exported library never defines the guards: its arena has no guard bytes and no check runs.
    files = export_library(cm.library, tmp_path / "lib")
    model_c = (tmp_path / "lib" / f"{prefix}_model.c").read_text()
    assert f"#if defined({GUARD_DEFINE})" in model_c
    build_files = [Path(f) for f in files if Path(f).suffix in (".mk", ".txt", ".cmake")]
    assert build_files and not any(GUARD_DEFINE in f.read_text() for f in build_files)
    without = compile_file(Path(__file__).parents[2] / "examples" / "small_cnn.py", board="mps2-an505")
    assert GUARD_DEFINE not in without.library.files["small_cnn_model.c"]  # a model without custom ops: untouched


@pytest.mark.parametrize("int8", [False, True])
def test_a_program_file_with_custom_ops_round_trips(tmp_path: Path, int8: bool) -> None:
    # `mcu export --format program --verify` loads the written file with the model's kernels and runs its vectors
    # (before: "unsupported (mcu_status 4)"); Program.load takes the model file, or says to pass it.
    import numpy as np

    import mcu
    from mcu.capture.loader import load_model_file
    from mcu.program.host import Program

    model = seam_model(tmp_path, bug=0, int8=int8)
    out = tmp_path / "seam.mpk"
    if int8:
        proc = mcu_in_process("export", "--format", "program", "--verify", "--bundle-tests", "--quantize", "int8",
                              str(model), "-o", str(out))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"verified {out}: 1 method(s), 2 bundled vector(s) match" in proc.stdout
    else:  # the Python API's way to the same file
        out.write_bytes(compile_file(model, board="mps2-an505").program_image(bundle_tests=True).program)
    function = "seam_copy_s8" if int8 else "seam_relu"
    with pytest.raises(McuError) as err:
        Program.load(out)
    assert err.value.message == (f"program {out} calls custom kernels ({function}): pass custom= the model file "
                                 "that registers them")
    assert err.value.hint == f"e.g. Program.load('{out}', custom='model.py'), or custom=<its custom_ops list>"
    for custom in (str(model), list(load_model_file(model).custom_ops)):
        method = Program.load(out, custom=custom).method("forward")
        for v in range(method.n_bundled):
            ins, expected, tols = method.bundled(v)
            for got, want, tol in zip(method.run_raw(*ins), expected, tols):
                assert np.max(np.abs(got.astype(np.float64) - want)) <= (tol or 0.0)
    other = mcu.custom_op("seam::other", fp32=("seam_other", str(KERNELS)), reference=lambda xs, args: xs[0])
    with pytest.raises(McuError, match=f"the program calls custom kernel {function}, which custom= does not "
                                       r"register \(its kernels: seam_other\)"):
        Program.load(out, custom=[other])


@requires_qemu
def test_a_program_file_with_custom_ops_runs_on_the_interpreter_firmware(tmp_path: Path) -> None:
    # The interpreter firmware links the user's kernels the program calls and registers them as its delegates.
    from mcu.device.boards import load_board
    from mcu.program.device import build_interpreter_firmware, run_program

    model = seam_model(tmp_path, bug=0, int8=True)
    cm = compile_file(model, board="mps2-an505", quantize="int8")
    image = cm.program_image(bundle_tests=True)
    program = image.program
    board = load_board("mps2-an505")
    with pytest.raises(McuError, match=r"the program calls custom kernels \(seam_copy_s8\): pass custom= the model "
                                       "file that registers them to build_interpreter_firmware"):
        build_interpreter_firmware(board, program=program)
    kernels = {fn for steps in image.instructions.values() for _, fn in steps if fn != "delegate"}
    fw = build_interpreter_firmware(board, kernels=kernels, program=program, custom=model)
    run = run_program(board, fw.elf, program)
    assert run.exit_code == 0 and run.error is None, run.console[-1500:]
    assert run.methods["forward"].passed


def test_a_host_run_runs_the_users_c_in_a_sanitized_child(tmp_path: Path) -> None:
    # Only large inputs make this kernel overrun: the check's inputs pass, a host run's do not; it runs in a
    # child process with the test firmware's arena guards, so mcu names it instead of crashing.
    import numpy as np
    import torch

    cm = compile_file(seam_model(tmp_path, bug=7), board="mps2-an505")
    x = cm.spec.test_inputs[0]
    assert np.allclose(cm.run(*x)[0].numpy(), cm.eager(*x)[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(McuError) as err:
        cm.run(torch.full((1, 8), 1e4))
    assert err.value.message.startswith("custom op seam::op7_1 (op7_1) (op7_1.py:22: "), err.value.message
    assert "its C kernel seam_relu writes outside its output on the host: the first changed byte is at byte " \
           "offset 32 of its output op7_1, which is 32 B long (just after its end)" in err.value.message


@requires_qemu
@pytest.mark.parametrize(("over", "int8", "tail"), [
    (1, False, "the first changed byte is at byte offset 32 of its output op1_1, which is 32 B long (just after its "
               "end); the changed bytes span 4 B of the 64 B guarded"),
    (256, True, "the first changed byte is at byte offset 8 of its output op1_256_s8, which is 8 B long (just after "
                "its end); the changed bytes span 32 B of the 64 B guarded"),
])
def test_the_interpreter_firmware_guards_name_an_overrun(tmp_path: Path, monkeypatch, over: int, int8: bool,
                                                         tail: str) -> None:
    # `mcu run --program` links the user's kernels into its interpreter firmware; its test build runs them
    # inside the same guards as the generated C's harness.
    from mcu.program.run_model import run_program_model

    _skip_host_check(monkeypatch)
    cm = compile_file(seam_model(tmp_path, bug=1, over=over, int8=int8), board="mps2-an505",
                      quantize="int8" if int8 else "none")
    with pytest.raises(McuError) as err:
        run_program_model(cm)
    kernel = "seam_copy_s8" if int8 else "seam_relu"
    assert f"its C kernel {kernel} writes outside its output on mps2-an505 (interpreter firmware): {tail}" in \
        err.value.message, err.value.message
    assert err.value.message.startswith(f"custom op seam::op1_{over}{'_s8' if int8 else ''} (op1_{over}"), \
        err.value.message
