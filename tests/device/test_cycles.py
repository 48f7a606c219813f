"""The cycle estimate of the QEMU plugin (ports/qemu/cycle_model.c): per-instruction costs of each core's
timing model on hand-written Thumb sequences, memory wait states charged by address, determinism.

Each case assembles a bare firmware (vector table, the sequence between calls of mcu_bench_begin and
mcu_bench_end, a semihosting exit), runs it in QEMU with the plugin and compares the region's cycles with
those of the same firmware without the sequence: the difference is what the sequence costs.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from mcu.device.boards import Board, L1Cache, load_board
from mcu.device.sim.qemu import SimResult, run_qemu

HAVE_TOOLS = shutil.which("arm-none-eabi-gcc") is not None and shutil.which("qemu-system-arm") is not None
pytestmark = pytest.mark.skipif(not HAVE_TOOLS, reason="arm-none-eabi-gcc or qemu-system-arm not installed")

PROGRAM = """
.syntax unified
.thumb
.section .vectors, "a"
.word __stack_top
.word reset
.text
.thumb_func
.global reset
reset:
{fpu_on}
  ldr r7, =data
{setup}
  .p2align 2              @ the region's first instruction is word-aligned: the refill into it is P = 2
  bl mcu_bench_begin
{sequence}
  bl mcu_bench_end
  movs r0, #0x18          @ SYS_EXIT
  ldr r1, =0x20026        @ ADP_Stopped_ApplicationExit: status 0
  bkpt 0xab
  b .
.thumb_func
.global mcu_bench_begin
mcu_bench_begin: bx lr
.thumb_func
.global mcu_bench_end
mcu_bench_end: bx lr
.ltorg
.p2align 4
constants: .word 1, 2, 3, 4, 5, 6, 7, 8
.data
.p2align 4
data: .space 64
"""


def lines(*insns: str) -> str:
    return "\n".join(f"  {i}" for i in insns)


# CPACR: full access to coprocessors 10 and 11 (the FPU, and MVE on the M55).
FPU_ON = lines("ldr r0, =0xE000ED88", "ldr r1, [r0]", "orr r1, r1, #(0xF << 20)", "str r1, [r0]", "dsb", "isb")


def run_sequence(board: Board, tmp: Path, sequence: str, setup: str = "") -> SimResult:
    source = tmp / "prog.S"
    fpu_on = FPU_ON if board.fpu is not None else ""
    source.write_text(PROGRAM.format(fpu_on=fpu_on, setup=setup, sequence=sequence))
    elf = tmp / "prog.elf"
    flash, ram = board.flash.origin, board.ram.origin
    subprocess.run(["arm-none-eabi-gcc", *board.cpu_flags, "-nostdlib", "-nostartfiles", "-Wl,-e,reset",
                    f"-Wl,--section-start=.vectors={flash:#x}", f"-Wl,-Ttext={flash + 0x400:#x}",
                    f"-Wl,-Tdata={ram:#x}", f"-Wl,--defsym=__stack_top={ram + 0x1000:#x}",
                    str(source), "-o", str(elf)], check=True, capture_output=True)
    result = run_qemu(board, elf, timeout_s=60)
    assert result.exit_code == 0, result.console
    return result


def sequence_cycles(board: Board, tmp: Path, sequence: str, setup: str = "") -> int:
    """Cycles of ``sequence`` alone: the region with it minus the region without it."""
    with_seq = run_sequence(board, tmp, sequence, setup)
    without = run_sequence(board, tmp, "", setup)
    assert len(with_seq.cycles) == 1 and len(without.cycles) == 1
    return with_seq.cycles[0] - without.cycles[0]


M0PLUS, M3, M4, M33, M55 = "mps2-an385-m0plus", "mps2-an385", "mps2-an386", "mps2-an505", "mps3-an547"

# (board, sequence, setup, cycles). Setup runs before the region (r7 points at 64 bytes of RAM).
CASES = [
    # data processing: 1 each on every core
    (M0PLUS, lines("adds r0, r0, #1", "adds r1, r1, #1", "lsls r2, r1, #2"), "", 3),
    (M4, lines("adds r0, r0, #1", "adds r1, r1, #1", "lsls r2, r1, #2"), "", 3),
    (M0PLUS, lines("nop", "nop"), "", 2),
    # single loads: 2 each on the M0+; on the M3/M4 family a load pipelines with the next (2 + 1)
    (M0PLUS, lines("ldr r1, [r7]", "ldr r2, [r7, #4]"), "", 4),
    (M3, lines("ldr r1, [r7]", "ldr r2, [r7, #4]"), "", 3),
    (M33, lines("ldr r1, [r7]", "ldr r2, [r7, #4]"), "", 3),
    # ... but not when the second load's address is the first one's result (2 + 2)
    (M4, lines("ldr r1, [r7]", "ldr r2, [r1]"), "str r7, [r7]", 4),
    # an address computed by the preceding instruction stalls the address generator one cycle
    (M4, lines("adds r1, r7, #4", "ldr r2, [r1]"), "", 4),
    (M0PLUS, lines("adds r1, r7, #4", "ldr r2, [r1]"), "", 3),
    # STR immediate: 1 (the data phase overlaps the next instruction)
    (M4, lines("str r0, [r7]", "str r1, [r7, #4]"), "", 2),
    # LDM/STM/PUSH/POP: 1 + N
    (M0PLUS, lines("push {r4-r6}", "pop {r4-r6}"), "", 8),
    (M4, lines("push {r4-r6}", "pop {r4-r6}"), "", 8),
    (M4, lines("ldm r7, {r0-r3}"), "", 5),
    # multiply: 1 on the M0+ (fast multiplier) and the M4; long multiply 3..5 on the M3 (upper bound 5)
    (M0PLUS, lines("muls r0, r1, r0"), "", 1),
    (M3, lines("umull r0, r1, r2, r3"), "", 5),
    (M4, lines("umull r0, r1, r2, r3"), "", 1),
    (M3, lines("mla r0, r1, r2, r3"), "", 2),
    (M4, lines("smlad r0, r1, r2, r3"), "", 1),
    # divide: 2..12, the upper bound
    (M3, lines("udiv r0, r1, r2"), "movs r1, #100\n  movs r2, #7", 12),
    (M33, lines("sdiv r0, r1, r2"), "movs r1, #100\n  movs r2, #7", 12),
    # branches: taken B<cond> costs the refill (M0+: 1, M3/M4: P = 2), not taken 1
    (M0PLUS, lines("cmp r0, r0", "beq 1f", "nop", "1: nop"), "", 4),
    (M4, lines("cmp r0, r0", "beq 1f", "nop", "1: nop"), "", 5),
    (M4, lines("cmp r0, r0", "bne 1f", "nop", "1: nop"), "", 4),
    (M4, lines("b 1f", "nop", "1: nop"), "", 4),
    # a taken branch to a 32-bit instruction straddling two fetch words: P = 3
    (M4, lines("b 1f", ".p2align 2", "nop", "1: add.w r0, r0, #1"), "", 5),
    # FPU (FPv4/FPv5 single precision): VADD 1, VMLA 3, VDIV 14
    (M4, lines("vadd.f32 s0, s1, s2"), "", 1),
    (M4, lines("vmla.f32 s0, s1, s2"), "", 3),
    (M33, lines("vdiv.f32 s0, s1, s2"), "", 14),
    (M4, lines("vldr s0, [r7]", "vldr s1, [r7, #4]"), "", 3),
    # MVE on the M55: 2 cycles per vector instruction; a load and a data-processing instruction overlap
    (M55, lines("vadd.i8 q0, q1, q2"), "", 2),
    (M55, lines("vadd.i8 q0, q1, q2", "vadd.i8 q3, q1, q2"), "", 4),
    (M55, lines("vldrb.s8 q0, [r7]", "vadd.i8 q3, q1, q2"), "", 3),
    (M55, lines("vldrb.s8 q0, [r7]", "vmladava.s8 r0, q0, q1", "vldrb.s8 q2, [r7, #16]",
                "vmladava.s8 r0, q2, q1"), "", 5),
    # gather: one element per cycle
    (M55, lines("vldrw.u32 q0, [r7, q1]"), "vmov.i32 q1, #0", 4),
]


@pytest.mark.parametrize(("board_name", "sequence", "setup", "cycles"), CASES,
                         ids=[f"{c[0]}-{c[1].split(chr(10))[0].strip()}-{i}" for i, c in enumerate(CASES)])
def test_instruction_costs(tmp_path: Path, board_name: str, sequence: str, setup: str, cycles: int) -> None:
    assert sequence_cycles(load_board(board_name), tmp_path, sequence, setup) == cycles


def test_a_page_boundary_costs_nothing(tmp_path: Path) -> None:
    """QEMU ends a translation block at a 1 kB page: eight 16-bit loads across a page boundary cost what they
    cost inside a page. Two effects are tested: the length of the instruction before the one that ends the
    page (QEMU 7.2 reports 4 bytes, its look at the next halfword in its bytes; once decoded as a 32-bit
    LDM/STM of eight registers) and the neighbour effect of the block before on the first instruction of a
    block entered by falling through (the fifth load pipelines with the fourth)."""
    board = load_board(M33)
    loads = [f"ldr r{1 + i % 4}, [r7, #{4 * i}]" for i in range(8)]
    # the text starts on a page (flash + 0x400); four loads end the next page, the skipped bytes fill it
    across = lines("b 2f", ".balign 1024", ".space 1016", "2:", *loads)
    inside = lines("b 2f", ".balign 1024", ".space 1000", "2:", *loads)
    # b 1 + its refill 2, the first load 2, seven pipelined loads 1 each
    assert sequence_cycles(board, tmp_path, across) == sequence_cycles(board, tmp_path, inside) == 12


def test_instruction_count_is_unchanged_by_the_model(tmp_path: Path) -> None:
    """The exact count stays what it is: one per executed instruction, cycles beside it."""
    result = run_sequence(load_board(M3), tmp_path, lines("adds r0, r0, #1", "umull r0, r1, r2, r3"))
    empty = run_sequence(load_board(M3), tmp_path, "")
    assert result.instructions[0] - empty.instructions[0] == 2
    assert result.cycles[0] - empty.cycles[0] == 6


def test_memory_wait_states_are_charged_by_address(tmp_path: Path) -> None:
    """Flash with 2 wait states: each 16-bit instruction costs half a 32-bit fetch word's 2 (1 more cycle),
    a load from flash 2 more; a load from the zero-wait-state RAM costs nothing more."""
    base = load_board(M4)
    slow = dataclasses.replace(base, flash=dataclasses.replace(base.flash, wait_states=2.0))
    adds = lines("adds r0, r0, #1", "adds r1, r1, #1", "adds r2, r2, #1", "adds r3, r3, #1")
    assert sequence_cycles(base, tmp_path, adds) == 4
    assert sequence_cycles(slow, tmp_path, adds) == 8
    load_flash = lines("ldr r1, [r6]")
    assert sequence_cycles(base, tmp_path, load_flash, "ldr r6, =constants") == 2
    assert sequence_cycles(slow, tmp_path, load_flash, "ldr r6, =constants") == 2 + 1 + 2
    assert sequence_cycles(slow, tmp_path, lines("ldr r1, [r7]")) == 2 + 1
    # a multiple transfer is one access per word on the 32-bit bus
    assert sequence_cycles(slow, tmp_path, lines("ldm r6, {r0-r3}"), "ldr r6, =constants") == 5 + 2 + 4 * 2
    # a cache serving 3 accesses in 4 leaves a quarter of the wait states
    cached = dataclasses.replace(base, flash=dataclasses.replace(base.flash, wait_states=8.0, hit_rate=0.75))
    assert sequence_cycles(cached, tmp_path, adds) == 8


def test_a_cache_in_front_of_a_memory_charges_its_misses_only(tmp_path: Path) -> None:
    """RAM behind a 32-byte two-way cache of 16-byte lines (one set), 10 cycles a miss: lines 0, 1, 0 (hit),
    2 (evicts line 1, the least recently used), 0 (hit), 1 (miss again): 4 misses."""
    base = load_board(M4)
    cached = dataclasses.replace(base, ram=dataclasses.replace(base.ram, wait_states=10.0, cache_bytes=32,
                                                               cache_ways=2, cache_line=16))
    reads = lines("ldr r0, [r7]", "ldr r1, [r7, #16]", "ldr r2, [r7, #4]", "ldr r3, [r7, #32]",
                  "ldr r4, [r7, #8]", "ldr r5, [r7, #20]")
    assert sequence_cycles(base, tmp_path, reads) == 2 + 5
    assert sequence_cycles(cached, tmp_path, reads) == 2 + 5 + 4 * 10


def test_a_data_cache_serves_data_and_the_cache_instructions(tmp_path: Path) -> None:
    """A flash accelerator's split caches: with a data cache of its own (32 bytes, two ways, 16-byte lines)
    the reads of the cache test miss 4 times; the 1 kB instruction-side cache alone would miss 3 times
    (lines 0, 1, 2 all fit). A loop whose code spans more lines than the data cache holds costs the same
    with and without it: fetches go through the instruction side only."""
    base = load_board(M4)
    icache = dataclasses.replace(base.ram, wait_states=10.0, cache_bytes=1024, cache_ways=2, cache_line=16)
    split = dataclasses.replace(icache, data_cache_bytes=32, data_cache_ways=2, data_cache_line=16)
    reads = lines("ldr r0, [r7]", "ldr r1, [r7, #16]", "ldr r2, [r7, #4]", "ldr r3, [r7, #32]",
                  "ldr r4, [r7, #8]", "ldr r5, [r7, #20]")
    assert sequence_cycles(dataclasses.replace(base, ram=icache), tmp_path, reads) == 2 + 5 + 3 * 10
    assert sequence_cycles(dataclasses.replace(base, ram=split), tmp_path, reads) == 2 + 5 + 4 * 10
    flash_icache = dataclasses.replace(base.flash, wait_states=10.0, cache_bytes=1024, cache_ways=2, cache_line=16)
    flash_split = dataclasses.replace(flash_icache, data_cache_bytes=32, data_cache_ways=2, data_cache_line=16)
    # the loop spans four 16-byte lines: through the 32-byte data cache it would miss every pass
    loop = lines(".p2align 6", "1: adds r0, r0, #1", *["nop.w"] * 14, "cmp r0, r1", "bne 1b")
    code_costs = {run_sequence(dataclasses.replace(base, flash=flash), tmp_path, loop,
                               "movs r0, #0\n  movs r1, #50").cycles[0] for flash in (flash_icache, flash_split)}
    assert len(code_costs) == 1


def test_code_behind_a_cache_misses_once_per_line(tmp_path: Path) -> None:
    """Code in a cached flash: the loop's lines miss on the first pass only, so twice the iterations cost
    exactly the uncached difference twice, never more misses (a hit-rate model would charge every pass)."""
    base = load_board(M33)
    cached = dataclasses.replace(base, flash=dataclasses.replace(base.flash, wait_states=10.0, cache_bytes=1024,
                                                                 cache_ways=2, cache_line=16))
    loop = lines(".p2align 6", "1: adds r0, r0, #1", "cmp r0, r1", "bne 1b", "nop.w", "nop.w", "nop.w", "nop.w")

    def cost(board: Board, n: int) -> int:
        return run_sequence(board, tmp_path, loop, f"movs r0, #0\n  movs r1, #{n}").cycles[0]

    misses = cost(cached, 50) - cost(base, 50)
    assert misses > 0 and misses % 10 == 0
    assert cost(cached, 100) - cost(base, 100) == misses


def test_the_cores_l1_data_cache_is_one_for_all_memories_behind_it(tmp_path: Path) -> None:
    """The M55's L1 data cache (``[l1_cache]``) serves every ``l1_cached`` memory: with one 32-byte line, a
    read of the flash's constants between two reads of the same RAM line evicts it (2 RAM misses at 10
    cycles; the flash's misses cost 0 here); with two ways the second RAM read hits (1 miss). Separate
    caches per memory would give 1 miss in both."""
    base = load_board(M55)
    reads = lines("ldr r0, [r7]", "ldr r1, [r6]", "ldr r2, [r7, #4]")
    uncached = run_sequence(base, tmp_path, reads, "ldr r6, =constants").cycles[0]

    def misses_cost(dcache: tuple[int, int, int]) -> int:
        board = dataclasses.replace(
            base, l1_cache=L1Cache(icache=(1024, 2, 32), dcache=dcache),
            flash=dataclasses.replace(base.flash, l1_cached=True),
            ram=dataclasses.replace(base.ram, wait_states=10.0, l1_cached=True))
        return run_sequence(board, tmp_path, reads, "ldr r6, =constants").cycles[0] - uncached

    assert misses_cost((32, 1, 32)) == 2 * 10
    assert misses_cost((64, 2, 32)) == 10


def test_vector_loads_are_charged_per_beat_pair_not_per_element(tmp_path: Path) -> None:
    """QEMU reports VLDRB.S8's 16 byte reads one by one; the M55 moves 64 bits at a time: 2 accesses."""
    base = load_board(M55)
    slow = dataclasses.replace(base, flash=dataclasses.replace(base.flash, wait_states=2.0))
    load = lines("vldrb.s8 q0, [r6]")
    assert sequence_cycles(base, tmp_path, load, "ldr r6, =constants") == 2
    assert sequence_cycles(slow, tmp_path, load, "ldr r6, =constants") == 2 + 2 + 2 * 2  # + fetch + 2 beats


def test_cycles_are_deterministic(tmp_path: Path) -> None:
    sequence = lines("1: ldr r1, [r7]", "adds r0, r0, #1", "cmp r0, #50", "bne 1b")
    board = load_board(M33)
    runs = [run_sequence(board, tmp_path, sequence, "movs r0, #0") for _ in range(3)]
    assert len({(r.instructions[0], r.cycles[0]) for r in runs}) == 1
    # 50 iterations of ldr (2), adds (1), cmp (1), bne (1, and 2 refill when taken: 49 times)
    empty = run_sequence(board, tmp_path, "", "movs r0, #0")
    assert runs[0].cycles[0] - empty.cycles[0] == 50 * 5 + 49 * 2


def test_board_files_state_wait_states_and_hit_rates(tmp_path: Path) -> None:
    """``wait_states``, ``fetch_wait_states``, ``hit_rate`` and ``fetch_hit_rate`` of a ``[memory.*]`` table
    become thousandths of a cycle per data access and per instruction fetch word; bad values are refused."""
    from mcu import paths
    from mcu.errors import McuError

    pico = load_board("pico")
    assert (pico.flash.cache_bytes, pico.flash.cache_ways, pico.flash.cache_line, pico.flash.wait_states) == \
        (16384, 2, 8, 112.0)
    assert (pico.ram.data_millicycles, pico.ram.fetch_millicycles) == (0, 0)
    l4r5 = load_board("mps2-an386-l4r5")  # RM0432: 5 wait states at 120 MHz behind the ART's split caches
    assert l4r5.clock_hz == 120_000_000 and l4r5.qemu_machine == "mps2-an386"
    assert (l4r5.flash.wait_states, l4r5.flash.cache_bytes, l4r5.flash.cache_line, l4r5.flash.data_cache_bytes,
            l4r5.flash.data_cache_line) == (5.0, 1024, 32, 256, 32)
    text = (paths.boards_dir() / "mps2-an505.toml").read_text()
    good = text.replace("length = 0x400000\nwait_states = 0\n",
                        "length = 0x400000\nwait_states = 4\nfetch_wait_states = 2\nhit_rate = 0.5\n", 1)
    (tmp_path / "mps2-an505.toml").write_text(good)
    flash = load_board("mps2-an505", tmp_path).flash
    assert (flash.data_millicycles, flash.fetch_millicycles) == (2000, 1000)
    an547 = load_board("mps3-an547")  # the M55's L1 caches in front of the SRAM and the QSPI flash, not the TCMs
    assert an547.l1_cache is not None
    assert (an547.l1_cache.icache, an547.l1_cache.dcache) == ((32768, 2, 32), (32768, 4, 32))
    assert [r.name for r in an547.regions if r.l1_cached] == ["qspi", "sram"]
    (tmp_path / "mps2-an505.toml").write_text(text.replace("wait_states = 0", "l1_cached = true", 1))
    with pytest.raises(McuError, match=r"memory\.flash\.l1_cached.*l1_cache"):
        load_board("mps2-an505", tmp_path)
    for bad in ("wait_states = -1", "hit_rate = 1.5", 'wait_states = "two"',
                "cache_bytes = 1000\ncache_ways = 2\ncache_line = 16",
                "data_cache_bytes = 256\ndata_cache_ways = 8\ndata_cache_line = 32"):
        (tmp_path / "mps2-an505.toml").write_text(text.replace("wait_states = 0", bad, 1))
        with pytest.raises(McuError, match=r"memory\.flash\.(wait_states|hit_rate|cache_bytes|data_cache_bytes)"):
            load_board("mps2-an505", tmp_path)
