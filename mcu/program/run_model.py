"""``mcu run --program`` for a model file: its program file, with the test vectors bundled, run by the
board's interpreter firmware (built once per board) in the simulator.

What the interpreter firmware cannot take is refused before anything is built: a kernel program files
do not express, more than its one arena, an arena, output or
program larger than the firmware's regions, more inputs or outputs than its harness holds
(codegen/program_firmware_main.c.j2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcu import progress
from mcu.errors import DoesNotFit, McuError
from mcu.device.custom_host import program_custom_functions
from mcu.program.device import (ProgramRun, build_interpreter_firmware, check_fits, program_fast_bytes,
                                program_layout, raise_on_program_guard, run_program)

MAX_IO = 16  # the firmware harness's MAX_IO


@dataclass
class ProgramModelRun:
    run: ProgramRun
    program_bytes: int
    firmware_flash_bytes: int
    firmware_ram_bytes: int
    stack_bytes: int  # the interpreter's fixed stack (its kernel table is called indirectly: no bound per model)
    program_in_ram_bytes: int = 0  # --weights-in fast: the RAM the program was copied into at boot

    @property
    def instructions(self) -> int | None:
        return self.run.instructions[0] if self.run.instructions else None


def check_interpreter_fits(cm: Any, program: bytes, weights: bytes | None) -> None:
    """Refuse, naming the limit, a program the board's interpreter firmware cannot run."""
    board = cm.board
    if board.sim_kind != "qemu" or board.qemu_machine is None:
        raise McuError(f"--program runs the interpreter firmware in QEMU; board '{board.name}' has none",
                       hint="pick a QEMU board (see `mcu boards`)")
    layout = program_layout(board)
    check_fits(layout, program, weights, board.name)
    where = f"the interpreter firmware on {board.name}"
    arenas = cm.memory.arenas
    if len(arenas) > 1:
        raise McuError(f"{where} has one arena; this model is planned over {len(arenas)} memory regions",
                       hint="run the generated C (drop --program)")
    if arenas and arenas[0].plan.arena_size > layout.arena_bytes:
        raise McuError(f"the model's arena ({arenas[0].plan.arena_size} B) is larger than the "
                       f"{layout.arena_bytes} B arena of {where}", hint="use a board with more RAM")
    outputs = sum((t.nbytes + 15) // 16 * 16 for t in cm.graph.outputs)
    if outputs > layout.output_bytes:
        raise McuError(f"the model's outputs ({outputs} B) exceed the {layout.output_bytes} B output buffer of "
                       f"{where}")
    if len(cm.graph.inputs) > MAX_IO or len(cm.graph.outputs) > MAX_IO:
        raise McuError(f"{where} takes at most {MAX_IO} inputs and {MAX_IO} outputs")


def fast_program_bytes(cm: Any, program: bytes) -> int:
    """``--weights-in fast``: the RAM the interpreter firmware copies ``program`` into (0: it stays in flash);
    refused in one line when that and the model's arena do not fit the firmware's arena together."""
    fast = program_fast_bytes(cm.board, program) if cm.weights_placement == "fast" else 0
    if not fast:
        return 0
    layout = program_layout(cm.board)
    arena = cm.memory.arenas[0].plan.arena_size if cm.memory.arenas else 0
    if fast + arena > layout.arena_bytes:
        raise DoesNotFit(f"the program file ({len(program)} B) does not fit {cm.board.name}'s RAM beside the "
                         f"model's arena ({arena} B): the interpreter firmware has {layout.arena_bytes} B for both",
                         hint="drop --weights-in fast (the program is then read from flash)", region="ram",
                         need=fast + arena, capacity=layout.arena_bytes)
    return fast


def run_program_model(cm: Any, timeout_s: float = 600.0) -> ProgramModelRun:
    image = cm.program_image(bundle_tests=True)  # a kernel program files cannot express is refused here
    check_interpreter_fits(cm, image.program, image.weights)
    fast = fast_program_bytes(cm, image.program)
    # A model with custom ops gets a firmware of its own with the user's kernels linked in; every other
    # model shares the board's one interpreter firmware (one per program size with --weights-in fast).
    custom = list(cm.spec.custom_ops)
    fw = (build_interpreter_firmware(cm.board, custom=custom, program=image.program, guard=True, fast_bytes=fast)
          if custom else build_interpreter_firmware(cm.board, fast_bytes=fast))
    with progress.stage("simulate"):
        run = run_program(cm.board, fw.elf, image.program, image.weights, timeout_s=timeout_s)
    if custom:
        raise_on_program_guard(cm.graph, program_custom_functions(image.program), run.console, cm.board.name)
    return ProgramModelRun(run=run, program_bytes=len(image.program), firmware_flash_bytes=fw.flash_bytes,
                           firmware_ram_bytes=fw.ram_bytes, program_in_ram_bytes=fast,
                           stack_bytes=program_layout(cm.board).firmware_board.stack_bytes)
