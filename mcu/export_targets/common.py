"""What every export target shares: the job, a file writer, the library tree and the example vectors."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from mcu.emit.c_model import FirmwareView, GeneratedLibrary, environment
from mcu.paths import runtime_dir

# Headers of the firmware harness only: an integrator brings their own platform.
_HARNESS_HEADERS = ("platform.h", "log.h")


@dataclass(frozen=True)
class ExportJob:
    """One export: the generated library, where it goes and (for the examples) the bundled vectors."""

    lib: GeneratedLibrary
    out_dir: Path
    vectors: FirmwareView | None = None  # None: no example app (export_library's plain library)
    board: str = ""  # the board the library was compiled for (the pico-sdk example picks PICO_BOARD from it)


@dataclass
class Writer:
    """Writes files under ``root`` and remembers every path written."""

    root: Path
    written: list[Path] = field(default_factory=list)

    def text(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.written.append(path)
        return path

    def copy(self, rel: str, src: Path) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)
        self.written.append(path)
        return path

    def render(self, rel: str, template: str, **view: Any) -> Path:
        return self.text(rel, environment().get_template(template).render(**view))


@dataclass(frozen=True)
class LibraryTree:
    """Paths (relative to the folder the tree was written to) of what a build must know."""

    sources: list[str]  # every .c file
    headers: list[str]  # every .h file
    include_dirs: list[str]  # "" is the folder itself


def write_library_tree(w: Writer, lib: GeneratedLibrary, base: str = "", include_dir: str = "include") -> LibraryTree:
    """The model's files, the runtime subset and kernels it uses, and the public headers, under ``base``.

    ``include_dir`` is where ``mcu/*.h`` goes ("" puts it beside the model's files, for build systems such
    as Arduino's that add only one folder to the include path)."""
    rt = runtime_dir()
    pre = f"{base}/" if base else ""
    sources: list[str] = []
    headers: list[str] = []

    def put(rel: str, text: str | None = None, src: Path | None = None) -> None:
        if src is not None:
            w.copy(pre + rel, src)
        else:
            w.text(pre + rel, text or "")
        (sources if rel.endswith(".c") else headers if rel.endswith(".h") else []).append(rel)

    for name, text in sorted(lib.files.items()):
        put(name, text)
    for rel in lib.runtime_sources:
        put(f"runtime/{Path(rel).name}", src=rt / rel)
    for k in lib.kernel_sources:
        # an external kernel (a user's custom op, CMSIS-NN) goes under kernels/ by its own name
        put(f"kernels/{Path(k).name}" if Path(k).is_absolute() else f"kernels/{k}", src=rt / "kernels" / k)
    internal = rt / "kernels" / "internal"
    if internal.is_dir():
        for header in sorted(internal.glob("*.h")):
            put(f"kernels/internal/{header.name}", src=header)
    inc = f"{include_dir}/" if include_dir else ""
    for header in sorted((rt / "include" / "mcu").glob("*.h")):
        if header.name not in _HARNESS_HEADERS:
            put(f"{inc}mcu/{header.name}", src=header)
    return LibraryTree(sources=sources, headers=headers, include_dirs=[""] + ([include_dir] if include_dir else []))


def write_vectors(w: Writer, job: ExportJob, folder: str) -> list[str]:
    """``<prefix>_vectors.{h,c}``: the bundled vectors and a runner the examples call. Returns the .c names."""
    assert job.vectors is not None, "examples need the bundled vectors"
    p = job.lib.prefix
    view = {"m": job.lib.view, "f": job.vectors}
    w.render(f"{folder}/{p}_vectors.h", "targets/common/vectors.h.j2", **view)
    w.render(f"{folder}/{p}_vectors.c", "targets/common/vectors.c.j2", **view)
    return [f"{p}_vectors.c"]
