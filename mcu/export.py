"""``mcu export``: write the generated C library as a self-contained folder.

The folder holds the model's header, sources and weights, exactly the
runtime files and kernels the model needs (with their headers), a
CMakeLists.txt and a Makefile fragment, so it drops into a foreign project.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mcu.emit.c_model import GeneratedLibrary, environment
from mcu.outputs import ensure_dir
from mcu.paths import runtime_dir


def export_library(lib: GeneratedLibrary, out_dir: Path) -> list[Path]:
    out_dir = ensure_dir(Path(out_dir))
    rt = runtime_dir()
    written: list[Path] = []

    def put(rel: str, text: str | None = None, src: Path | None = None) -> None:
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if src is not None:
            shutil.copyfile(src, path)
        else:
            path.write_text(text or "")
        written.append(path)

    for name, text in lib.files.items():
        put(name, text)
    sources = [n for n in lib.files if n.endswith(".c")]
    for rel in lib.runtime_sources:  # e.g. src/mcu_status.c
        put(f"runtime/{Path(rel).name}", src=rt / rel)
        sources.append(f"runtime/{Path(rel).name}")
    for k in lib.kernel_sources:
        put(f"kernels/{k}", src=rt / "kernels" / k)
        sources.append(f"kernels/{k}")
    internal = rt / "kernels" / "internal"
    if internal.is_dir():
        for header in sorted(internal.glob("*.h")):
            put(f"kernels/internal/{header.name}", src=header)
    for header in sorted((rt / "include" / "mcu").glob("*.h")):
        if header.name in ("platform.h", "log.h"):
            continue  # firmware-harness only; an integrator brings their own platform
        put(f"include/mcu/{header.name}", src=header)
    env = environment()
    put(f"{lib.prefix}.mk", env.get_template("library.mk.j2").render(m=lib.view, sources=sources))
    put("CMakeLists.txt", env.get_template("CMakeLists.txt.j2").render(m=lib.view, sources=sources))
    put("README.md", env.get_template("library_README.md.j2").render(m=lib.view))
    return written
