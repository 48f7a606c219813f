"""``mcu export``: write the generated C library for a firmware ecosystem.

The default target (cmake, or make: the same folder) holds the model's header, sources and weights,
exactly the runtime files and kernels the model needs (with their headers), a CMakeLists.txt and a
Makefile fragment, so it drops into a foreign project. The other targets (pico-sdk, arduino, zephyr,
cmsis-pack) wrap the same files in that ecosystem's layout; see mcu/emit/targets/.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mcu.emit.c_model import GeneratedLibrary, firmware_view
from mcu.errors import McuError
from mcu.emit.targets import DEFAULT_TARGET, TARGETS, ExportJob
from mcu.emit.targets.common import ModelStack
from mcu.emit.outputs import ensure_dir
from mcu.device.stack import bound, load_frames
from mcu.device.toolchain import COMMON_CFLAGS, find_cross_compiler, find_cross_objdump

if TYPE_CHECKING:
    from mcu.api import CompiledModel


def export_library(lib: GeneratedLibrary, out_dir: Path) -> list[Path]:
    """The default target's folder, from the generated library alone."""
    return TARGETS[DEFAULT_TARGET].write(ExportJob(lib=lib, out_dir=ensure_dir(Path(out_dir))))


def model_stack(cm: CompiledModel) -> ModelStack:
    """The worst-case stack of the model's run function on its board's core: the call graph from
    ``<prefix>_run`` over the model's firmware (built with -fstack-usage, content-keyed in the cache), with
    the frames that build recorded (mcu/device/stack.py)."""
    board = cm.board
    if board.kind != "mcu":
        return ModelStack(bytes=None, board=board.name, core=board.core,
                          reason=f"{board.name} is not a bare-metal board: the stack is the process's, "
                                 "not bounded here")
    entry = f"{cm.library.prefix}_run"
    try:
        fw = cm.build()
        frames = load_frames(fw.elf.with_suffix(".frames.json"))
        report = bound(fw.elf, frames, find_cross_objdump(find_cross_compiler()), entry=entry)
    except McuError as e:
        return ModelStack(bytes=None, board=board.name, core=board.core, reason=e.message)
    flags = " ".join(f for f in COMMON_CFLAGS if f.startswith("-O"))
    return ModelStack(bytes=report.worst_case_bytes, board=board.name, core=board.core, flags=flags,
                      chain=" -> ".join(f for f, _ in report.path))


def export_target(cm: CompiledModel, target: str, out_dir: Path) -> list[Path]:
    """Write ``target``'s files for a compiled model; examples run the model's bundled test vectors."""
    if target not in TARGETS:
        raise McuError(f"unknown export target '{target}'", hint=f"choose one of: {', '.join(TARGETS)}")
    t = TARGETS[target]
    vectors = None
    if t.example:
        vec_in = [cm.encode_inputs(xs) for xs in cm.spec.test_inputs]
        vectors = firmware_view(cm.library, vec_in, cm.expected_outputs, cm.tolerances())
    job = ExportJob(lib=cm.library, out_dir=ensure_dir(Path(out_dir)), vectors=vectors, board=cm.board.name,
                    stack=model_stack(cm))
    return t.write(job)
