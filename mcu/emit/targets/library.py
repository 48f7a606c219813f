"""cmake and make: the plain library folder (the default), with a CMakeLists.txt and a Makefile fragment."""

from __future__ import annotations

from pathlib import Path

from mcu.emit.targets.common import ExportJob, LibraryTree, Writer, write_library_tree


def write_build_files(w: Writer, job: ExportJob, tree: LibraryTree, base: str = "") -> None:
    """CMakeLists.txt (for add_subdirectory) and ``<prefix>.mk`` beside a library tree."""
    pre = f"{base}/" if base else ""
    view = {"m": job.lib.view, "sources": tree.sources, "defines": job.lib.defines}
    w.render(f"{pre}{job.lib.prefix}.mk", "targets/cmake/library.mk.j2", **view)
    w.render(f"{pre}CMakeLists.txt", "targets/cmake/CMakeLists.txt.j2", **view)
    w.render(f"{pre}README.md", "library_README.md.j2", m=job.lib.view, stack=job.stack)


def write(job: ExportJob) -> list[Path]:
    w = Writer(job.out_dir)
    tree = write_library_tree(w, job)
    write_build_files(w, job, tree)
    return w.written
