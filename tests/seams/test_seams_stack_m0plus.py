"""The worst-case stack on Cortex-M0+ (ARMv6-M): libgcc's soft-float division dispatches through a
switch table (``mov pc, rN``), which bounds as a branch inside the function; a call target is the
function that holds the address, whatever symbol objdump prints next to it. Both on real images: a
small cross-built one, and fp32 / int8 models that run on QEMU with the stack painted."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mcu.errors import McuError
from mcu.device.stack import analyze, disassemble
from repo import requires_qemu

M0PLUS = ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft")


def _tools() -> tuple[str, Path]:
    gcc, objdump = shutil.which("arm-none-eabi-gcc"), shutil.which("arm-none-eabi-objdump")
    if gcc is None or objdump is None:
        pytest.skip("needs arm-none-eabi-gcc and objdump (run scripts/setup)")
    return gcc, Path(objdump)


def _build_m0plus(tmp_path: Path, code: str, *ldflags: str) -> tuple[Path, list[Path]]:
    gcc, _ = _tools()
    src = tmp_path / "t.c"
    src.write_text(textwrap.dedent(code))
    elf = tmp_path / "t.elf"
    subprocess.run([gcc, *M0PLUS, "-O2", "-fstack-usage", "-nostartfiles", "-Wl,-e,Reset_Handler",
                    "-o", str(elf), str(src), *ldflags, "-lgcc"], check=True, cwd=tmp_path)
    return elf, sorted(tmp_path.glob("*.su"))


def test_soft_float_division_is_bounded_on_armv6m(tmp_path) -> None:
    _, objdump = _tools()
    elf, su = _build_m0plus(tmp_path, """
        volatile float a = 3.0f, b = 7.0f, sink;
        void Reset_Handler(void) { sink = a / b; for (;;) {} }
    """)
    funcs = disassemble(objdump, elf)
    assert "__aeabi_fdiv" in funcs and funcs["__aeabi_fdiv"].indirect is None
    report = analyze(elf, su, objdump)
    assert [f for f, _ in report.path] == ["Reset_Handler", "__aeabi_fdiv"]
    assert report.path[-1][1] == 32  # push {r4-r7, lr} and push {r6, r7, lr}


_TABLE = """
    volatile int sink;
    __attribute__((noinline)) void other(void) { sink = 2; }
    __attribute__((naked, noinline)) void dispatch(int i) {
        __asm__ volatile(
            ".syntax unified\\n\\tcmp r0, #1\\n\\tbhi 2f\\n\\tldr r1, =3f\\n\\t"
            "lsls r0, r0, #2\\n\\tldr r0, [r1, r0]\\n\\t"
            "mov pc, r0\\n\\t1: bx lr\\n\\t2: bx lr\\n\\t.align 2\\n\\t3: .word 1b + 1, %s + 1\\n\\t.ltorg");
    }
    void Reset_Handler(void) { other(); dispatch(sink); for (;;) {} }
"""


def test_a_switch_table_leaving_the_function_stays_refused(tmp_path) -> None:
    _, objdump = _tools()
    (tmp_path / "in").mkdir()
    elf, su = _build_m0plus(tmp_path / "in", _TABLE % "2b")
    analyze(elf, su, objdump)  # both entries inside dispatch: a branch
    (tmp_path / "out").mkdir()
    elf, su = _build_m0plus(tmp_path / "out", _TABLE % "other")
    with pytest.raises(McuError, match=r"dispatch makes an indirect call \(`mov\s+pc, r0`\)") as info:
        analyze(elf, su, objdump)
    assert "fixed stack" not in str(info.value)  # the advice names nothing that does not exist


def test_an_absolute_symbol_inside_the_code_is_not_a_call(tmp_path) -> None:
    """The linker's ``__stack_size__`` is a number; when it equals an address inside a function, objdump
    names the branch targets after it ("<__stack_size__+0x40>")."""
    _, objdump = _tools()
    code = """
        volatile int sink;
        /* Thumb-1's far jump: a BL to a label in the same function (GCC does this past 2 KiB). */
        __attribute__((naked, noinline)) void far(void) {
            __asm__ volatile(".syntax unified\\n\\tpush {r4, lr}\\n\\tbl 1f\\n\\t.space 64\\n\\t1: pop {r4, pc}");
        }
        void Reset_Handler(void) { far(); sink = 1; for (;;) {} }
    """
    elf, _ = _build_m0plus(tmp_path, code)
    start = disassemble(objdump, elf)["far"].addr
    elf, su = _build_m0plus(tmp_path, code, f"-Wl,--defsym=__stack_size__={start + 8:#x}")
    listing = subprocess.run([str(objdump), "-d", str(elf)], capture_output=True, text=True).stdout
    assert "<__stack_size__+0x" in listing  # the image really shows the misleading name
    report = analyze(elf, su, objdump)
    assert report.path[-1] == ("far", 8)


CNN1D_SOFTMAX = """
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(3, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
                                  nn.Conv1d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(32, 6)

    def forward(self, x):
        return torch.softmax(self.fc(self.body(x).flatten(1)), dim=1)


model = Net().eval()
example_inputs = (torch.randn(1, 3, 128),)
calibration = [(torch.randn(1, 3, 128),) for _ in range(16)]
test_inputs = [(torch.randn(1, 3, 128),) for _ in range(2)]
"""


def _runs_with_a_bounded_stack(cm) -> None:
    from mcu.devtools.stackcheck import measure_stack

    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    fw = cm.build()
    assert fw.stack is not None and fw.sections[".stack"] == fw.stack.reserved_bytes
    check = measure_stack(cm)
    # The SysTick that counts cycles can interrupt the deepest call: ARMv6-M stacks 8 words (32 B) for
    # it, which the reserved margin covers.
    assert check.passed and 0 < check.high_water_bytes <= check.report.worst_case_bytes + 32
    assert check.high_water_bytes <= fw.stack.reserved_bytes


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name", ["small_cnn", "transformer_block"])
def test_fp32_model_on_m0plus(compiled, name: str) -> None:
    """small_cnn links libgcc's soft-float division; transformer_block's mcu_unary_f32 has a switch whose
    table address GCC hoists out of the loop (``mov r3, r8; ldr r3, [r3]; mov pc, r3``)."""
    cm = compiled(name, "mps2-an385-m0plus", "none")
    _runs_with_a_bounded_stack(cm)
    funcs = disassemble(Path(shutil.which("arm-none-eabi-objdump") or "objdump"), cm.build().elf)
    assert "__aeabi_fdiv" in funcs  # the soft-float division is accepted and in the image


@requires_qemu
@pytest.mark.qemu
def test_int8_conv1d_softmax_on_m0plus(tmp_path) -> None:
    from mcu.api import compile_file

    path = tmp_path / "cnn1d_softmax.py"
    path.write_text(CNN1D_SOFTMAX)
    cm = compile_file(path, board="mps2-an385-m0plus", quantize="int8")
    _runs_with_a_bounded_stack(cm)
    sim = cm.simulate()
    for raw, x in zip(sim.outputs_raw, cm.spec.test_inputs):
        for got, want in zip(raw, cm.raw_outputs(cm.reference_raw(*x))):
            np.testing.assert_array_equal(got, want)


def test_static_functions_sharing_a_name_are_each_read(tmp_path) -> None:
    """Two objects may each hold a static ``helper``: each one's calls and frame count (the analysis once
    kept only the last one in the listing, losing the other's deeper callee)."""
    gcc, objdump = _tools()
    (tmp_path / "a.c").write_text(textwrap.dedent("""
        volatile int sink;
        __attribute__((noinline)) void deep(void) { volatile char buf[200]; buf[0] = 1; sink = buf[0]; }
        static __attribute__((noinline)) void helper(void) { deep(); sink = 1; }
        void from_a(void) { helper(); }
    """))
    (tmp_path / "b.c").write_text(textwrap.dedent("""
        extern volatile int sink;
        void from_a(void);
        static __attribute__((noinline)) void helper(void) { sink = 2; }
        void Reset_Handler(void) { helper(); from_a(); for (;;) {} }
    """))
    elf = tmp_path / "t.elf"
    subprocess.run([gcc, *M0PLUS, "-O2", "-fstack-usage", "-nostartfiles", "-Wl,-e,Reset_Handler", "-o", str(elf),
                    str(tmp_path / "a.c"), str(tmp_path / "b.c")], check=True, cwd=tmp_path)
    listing = subprocess.run([str(objdump), "-d", str(elf)], capture_output=True, text=True).stdout
    assert listing.count("<helper>:") == 2
    report = analyze(elf, sorted(tmp_path.glob("*.su")), objdump)
    assert "deep" in [f for f, _ in report.path], report.chain()
