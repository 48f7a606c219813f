"""Stack bound: on every reference model and board, the worst case from -fstack-usage and the call graph is what the linker
reserves (plus a margin), the stack painted in QEMU never goes deeper, and the small CNN int8 on mps2-an505
needs at most 16 KiB of RAM in total."""

from __future__ import annotations

import textwrap

import pytest

from mcu.errors import McuError
from mcu.device.stack import STACK_MARGIN, analyze, read_su
from repo import REFERENCE_MODELS, requires_qemu


@pytest.mark.slow
@requires_qemu
@pytest.mark.parametrize("name,board", [(m, b) for b in ("mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385",
                                                          "mps2-an385-m0plus") for m in REFERENCE_MODELS])
def test_measured_stack_stays_within_the_reserved_stack(compiled, name: str, board: str) -> None:
    from mcu.devtools.stackcheck import measure_stack

    cm = compiled(name, board, "int8")
    fw = cm.build()
    check = measure_stack(cm)
    assert check.passed
    assert fw.stack is not None
    # Painting adds loops to Reset_Handler only (on Cortex-M0+ its frame grows by a few bytes): below it
    # the measured firmware's deepest path is the normal firmware's, frame for frame.
    assert fw.stack.path[0][0] == check.report.path[0][0] == "Reset_Handler"
    assert fw.stack.path[1:] == check.report.path[1:]
    assert fw.sections[".stack"] == fw.stack.reserved_bytes
    assert fw.stack.reserved_bytes >= fw.stack.worst_case_bytes + STACK_MARGIN
    # The painted mark also holds whatever interrupt landed at the deepest point: SysTick's handler (it
    # counts the wraps of the 24-bit timer and, in QEMU, fires on host time) on top of the hardware's
    # exception frame. The call graph's worst case leaves interrupts out; the reserved margin covers them.
    assert 0 < check.high_water_bytes <= check.report.worst_case_bytes + _interrupt_bytes(cm.board, fw.elf)
    assert check.high_water_bytes <= fw.stack.reserved_bytes  # what the normal firmware reserves suffices
    assert fw.stack.path[0][0] == "Reset_Handler" and sum(b for _, b in fw.stack.path) == fw.stack.worst_case_bytes


def _interrupt_bytes(board, elf) -> int:
    """One interrupt on the main stack: the exception frame the hardware pushes (8 words; 26 with the
    floating-point context on a core with an FPU) and the deepest path of the image's SysTick handler.
    A core whose DWT counts cycles has none of its own (the name is the fault reporter's alias, and SysTick
    is never started): nothing interrupts the model."""
    from mcu.device.elf import read_elf
    from mcu.device.stack import bound, load_frames
    from mcu.device.toolchain import find_cross_compiler, find_cross_objdump

    image = read_elf(elf)
    handler, fault = image.symbol("SysTick_Handler"), image.symbol("mcu_cm_fault_entry")
    if handler is None or (fault is not None and handler.value == fault.value):
        return 0
    frame = 8 * 4 if board.fpu is None else 26 * 4
    handler = bound(elf, load_frames(elf.with_suffix(".frames.json")), find_cross_objdump(find_cross_compiler()),
                    entry="SysTick_Handler")
    assert frame + handler.worst_case_bytes <= STACK_MARGIN  # the reservation's margin covers it
    return frame + handler.worst_case_bytes


@requires_qemu
def test_small_cnn_int8_fits_16_kib_of_ram(compiled) -> None:
    cm = compiled("small_cnn", "mps2-an505", "int8")
    fw = cm.build()
    assert fw.sizes is not None
    assert fw.ram_bytes == fw.sizes.ram_total <= 16 * 1024
    assert fw.sizes.ram["stack"] == fw.stack.reserved_bytes < 8192  # not the board's fixed 8 KiB


def test_unbounded_frames_are_refused(tmp_path) -> None:
    su = tmp_path / "a.su"
    su.write_text("a.c:3:6:fixed\t48\tstatic\na.c:9:6:bounded\t64\tdynamic,bounded\n")
    assert read_su([su]) == {"fixed": 48, "bounded": 64}
    su.write_text("a.c:12:6:vla_user\t16\tdynamic\n")
    with pytest.raises(McuError, match="vla_user .* run-time size"):
        read_su([su])


def _cross_build(tmp_path, code: str):
    import shutil
    import subprocess

    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("needs arm-none-eabi-gcc (run scripts/setup)")
    src = tmp_path / "t.c"
    src.write_text(textwrap.dedent(code))
    elf = tmp_path / "t.elf"
    subprocess.run([gcc, "-mcpu=cortex-m33", "-mthumb", "-O2", "-fstack-usage", "-nostdlib", "-nostartfiles",
                    "-Wl,-e,Reset_Handler", "-o", str(elf), str(src)], check=True, cwd=tmp_path)
    return elf, sorted(tmp_path.glob("*.su")), __import__("pathlib").Path(shutil.which("arm-none-eabi-objdump"))


def test_deepest_path_and_refusals_on_a_real_image(tmp_path) -> None:
    elf, su, objdump = _cross_build(tmp_path, """
        volatile int sink;
        __attribute__((noinline)) void leaf(void) { volatile char buf[100]; buf[0] = 1; sink = buf[0]; }
        __attribute__((noinline)) void mid(void) { volatile char buf[40]; buf[0] = 2; leaf(); sink = buf[0]; }
        __attribute__((noinline)) void shallow(void) { sink = 3; }
        void Reset_Handler(void) { mid(); shallow(); for (;;) {} }
    """)
    report = analyze(elf, su, objdump)
    names = [f for f, _ in report.path]
    assert names == ["Reset_Handler", "mid", "leaf"]
    assert report.worst_case_bytes == sum(b for _, b in report.path) and report.path[2][1] >= 100

    elf, su, objdump = _cross_build(tmp_path, """
        volatile int sink;
        void (*volatile hook)(void);
        __attribute__((noinline)) void f(void) { hook(); sink = 1; }
        void Reset_Handler(void) { f(); for (;;) {} }
    """)
    with pytest.raises(McuError, match=r"f makes an indirect call \(`blx"):
        analyze(elf, su, objdump)

    elf, su, objdump = _cross_build(tmp_path, """
        volatile int sink;
        __attribute__((noinline)) int down(int n) {
            volatile char b[8];  /* live across the call: no loop in its place */
            b[0] = (char)n;
            if (n > 0) { sink += down(n - 1); }
            return b[0];
        }
        void Reset_Handler(void) { sink = down(sink); for (;;) {} }
    """)
    with pytest.raises(McuError, match="recursion"):
        analyze(elf, su, objdump)


def test_naked_assembly_frames_count_their_pushes(tmp_path) -> None:
    """-fstack-usage says 0 bytes for a naked function; the pushes and sp moves in its code still count."""
    elf, su, objdump = _cross_build(tmp_path, """
        volatile int sink;
        __attribute__((naked, noinline)) void loop(void) {
            __asm__ volatile("push {r4-r11, lr}\\n\\tsub sp, sp, #64\\n\\tadd sp, sp, #64\\n\\t"
                             "pop {r4-r11, pc}\\n\\t");
        }
        void Reset_Handler(void) { loop(); sink = 1; for (;;) {} }
    """)
    assert read_su(su)["loop"] == 0
    report = analyze(elf, su, objdump)
    assert report.path[-1] == ("loop", 9 * 4 + 64)


def test_a_changed_stack_analyser_rebuilds_the_stack_report(monkeypatch) -> None:
    """The stack report is cached with the firmware: its build key names the analyser's source, so editing
    mcu/device/stack.py gives a new key instead of the old report."""
    from mcu.device import toolchain
    from mcu.device.boards import load_board

    board = load_board("mps2-an505")
    with_report = toolchain.build_recipe("script", board, stack_usage=True)
    assert with_report != toolchain.build_recipe("script", board, stack_usage=False)
    real = toolchain.file_digest
    monkeypatch.setattr(toolchain, "file_digest",
                        lambda p: "edited" if p.name == "stack.py" else real(p))
    assert toolchain.build_recipe("script", board, stack_usage=True) != with_report
