"""pico-sdk: the library as a folder for ``add_subdirectory`` in a Pico SDK project, and an example app.

    out/CMakeLists.txt            target <prefix> (link it with pico_stdlib into your app)
    out/example/                  a Pico SDK project running the bundled vectors, printing over UART and USB
    out/README.md                 the three commands that build the example
"""

from __future__ import annotations

from pathlib import Path

from mcu.emit.targets.common import (EXAMPLE_OWN_BYTES, ExportJob, Writer, example_stack_bytes,
                                       write_library_tree, write_vectors)
from mcu.emit.targets.library import write_build_files

# The SDK's PICO_BOARD for our boards; anything else defaults to the original Pico.
_PICO_BOARDS = {"pico": "pico", "pico2": "pico2"}
# The SDK's PICO_STACK_SIZE default (pico/platform.h), for a model whose stack is unknown
SDK_STACK_SIZE = 0x800
# The SDK's memory maps reserve the core-0 stack in the 4 KB SCRATCH_Y bank
SCRATCH_Y_BYTES = 4096


def stack_size(job: ExportJob) -> int:
    """The stack the example's model thread needs: the model's analysed stack plus the example's own use
    (PICO_STACK_SIZE when it fits core 0's SCRATCH_Y bank, else core 1's stack)."""
    return example_stack_bytes(job.stack, SDK_STACK_SIZE)


def write(job: ExportJob) -> list[Path]:
    w = Writer(job.out_dir)
    tree = write_library_tree(w, job)
    write_build_files(w, job, tree)
    vector_sources = write_vectors(w, job, "example")
    view = {"m": job.lib.view, "vector_sources": vector_sources, "pico_board": _PICO_BOARDS.get(job.board, "pico"),
            "stack": job.stack, "own": EXAMPLE_OWN_BYTES, "stack_size": stack_size(job), "scratch_y": SCRATCH_Y_BYTES,
            "on_core1": stack_size(job) > SCRATCH_Y_BYTES}
    w.render("example/CMakeLists.txt", "targets/pico-sdk/example_CMakeLists.txt.j2", **view)
    w.render("example/main.c", "targets/pico-sdk/main.c.j2", **view)
    w.render("README.md", "targets/pico-sdk/README.md.j2", **view)
    return w.written
