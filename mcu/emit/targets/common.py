"""What every export target shares: the job, a file writer, the library tree and the example vectors."""

from __future__ import annotations

import posixpath
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from mcu.emit.c_model import FirmwareView, GeneratedLibrary, environment
from mcu.paths import kernel_source, kernels_dir, runtime_dir

# Headers of the firmware harness only: an integrator brings their own platform.
_HARNESS_HEADERS = ("platform.h", "log.h")
# What C11's <math.h> declares. Some RTOS C libraries (Zephyr's minimal libc) ship the header without them,
# so a target asks for a full C library when a shipped file uses one: including the header is not enough
# (the generated model.c includes it whatever the model).
_MATH_FUNCTIONS = ("acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ilogb "
                   "ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma "
                   "tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod remainder remquo "
                   "copysign nan nextafter nexttoward fdim fmax fmin fma").split()
_MATH_MACROS = ("INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL isnan isinf isfinite isnormal signbit fpclassify "
                "isgreater isgreaterequal isless islessequal islessgreater isunordered M_PI M_E M_LN2 M_SQRT2").split()
# a function is a use when called (a local may be named "remainder"), a macro wherever it appears
_MATH_NAMES = re.compile(r"\b(?:(?:%s)[fl]?\s*\(|(?:%s)\b)" % ("|".join(_MATH_FUNCTIONS), "|".join(_MATH_MACROS)))
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def uses_libm(c_text: str) -> bool:
    """Whether C source calls a <math.h> function or uses one of its macros (comments aside)."""
    return _MATH_NAMES.search(_C_COMMENT.sub(" ", c_text)) is not None


@dataclass(frozen=True)
class ModelStack:
    """The worst-case stack of ``<prefix>_run()`` (mcu/device/stack.py on the model's firmware for its board), or
    why there is none (``bytes`` None: a board without a bare-metal build, or an analysis that refused)."""

    bytes: int | None
    board: str
    core: str
    flags: str = ""  # the optimisation flags of the build the figure is for
    chain: str = ""  # the deepest call chain
    reason: str = ""  # why there is no figure


# What an example application adds to the model's stack on the same thread: its main and the vectors
# runner (the outputs are static, so their frames are small), the print call after the run (the deepest
# of the three: a printf-family formatter, several hundred bytes in newlib), and the exception entries that
# land on the same stack (the basic frame is 32 B, 104 B with the floating-point context, once per nesting
# level). The Zephyr sample prints its thread's high-water mark: on qemu_cortex_m3 it used 140 B beyond the
# small CNN's figure (tests/seams/test_seams_export.py checks the sum stays below this allowance).
EXAMPLE_OWN_BYTES = 1024


def example_stack_bytes(stack: ModelStack | None, fallback: int) -> int:
    """The stack an example application's thread needs: the model's plus the example's own, rounded up
    to 256 B (``fallback`` when the model's stack is unknown)."""
    if stack is None or stack.bytes is None:
        return fallback
    return (stack.bytes + EXAMPLE_OWN_BYTES + 255) // 256 * 256


@dataclass(frozen=True)
class ExportJob:
    """One export: the generated library, where it goes and (for the examples) the bundled vectors."""

    lib: GeneratedLibrary
    out_dir: Path
    vectors: FirmwareView | None = None  # None: no example app (export_library's plain library)
    board: str = ""  # the board the library was compiled for (the pico-sdk example picks PICO_BOARD from it)
    stack: ModelStack | None = None  # the model's worst-case stack (the header's <PREFIX>_STACK_BYTES)


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
    needs_libm: bool = False  # a shipped file uses <math.h> (a C library with the math functions must link)


def library_files(lib: GeneratedLibrary, stack: ModelStack | None = None) -> dict[str, str]:
    """The generated files, the public header with the model's stack figure when there is one."""
    files = dict(lib.files)
    header = f"{lib.prefix}_model.h"
    if stack is not None and header in files:
        files[header] = environment().get_template("model.h.j2").render(m=lib.view, stack=stack)
    return files


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)


def include_closure(texts: dict[str, str], available: dict[str, Path], include_dirs: list[str]) -> list[str]:
    """The headers of ``available`` (tree path -> file) that the files of ``texts`` (tree path -> text)
    include, directly or through each other, resolved as the compiler would: beside the including file,
    then along ``include_dirs`` ("" is the tree's root). Every ``#include`` counts whatever preprocessor
    condition surrounds it, so the result covers every core's build. System headers and headers of an
    external kernel's own (not in ``available``) are left to the compiler's search path."""
    needed: set[str] = set()
    queue = list(texts.items())
    while queue:
        rel, text = queue.pop()
        for name in _INCLUDE.findall(text):
            here = posixpath.dirname(rel)
            for cand in [posixpath.normpath(posixpath.join(here, name)),
                         *(posixpath.normpath(posixpath.join(d, name)) for d in include_dirs)]:
                if cand in texts:
                    break
                if cand in available:
                    if cand not in needed:
                        needed.add(cand)
                        queue.append((cand, available[cand].read_text()))
                    break
    return sorted(needed)


def _define_prelude(defines: dict[str, int]) -> str:
    lines = ["/* mcu: the kernels specialised for this model (the compile definitions of mcu's own builds of",
             " * it, written here because this build system takes no per-library compile flags) */"]
    for k, v in sorted(defines.items()):
        lines += [f"#ifndef {k}", f"#define {k} {v}", "#endif"]
    return "\n".join(lines) + "\n\n"


def write_library_tree(w: Writer, job: ExportJob, base: str = "", include_dir: str = "include",
                       embed_defines: bool = False) -> LibraryTree:
    """The model's files, the runtime subset and kernels it uses, and the headers these include (the
    include closure, nothing more), under ``base``.

    ``include_dir`` is where ``mcu/*.h`` goes ("" puts it beside the model's files, for build systems such
    as Arduino's that add only one folder to the include path). ``embed_defines``: the library's compile
    definitions (mcu/backends/optimized/specialise.py) go at the top of every C source, for build systems that
    cannot pass them as flags."""
    lib = job.lib
    rt = runtime_dir()
    pre = f"{base}/" if base else ""
    inc = f"{include_dir}/" if include_dir else ""
    texts: dict[str, str] = dict(library_files(lib, job.stack))
    for rel in lib.runtime_sources:
        texts[f"runtime/{Path(rel).name}"] = (rt / rel).read_text()
    for k in lib.kernel_sources:
        # mcu's kernels keep their family folder; an external kernel (a user's custom op, CMSIS-NN) goes
        # under kernels/ by its own name
        path = kernel_source(k)
        texts[f"kernels/{Path(k).name}" if Path(k).is_absolute() else
              f"kernels/{path.relative_to(kernels_dir()).as_posix()}"] = path.read_text()
    available: dict[str, Path] = {}
    for header in sorted(kernels_dir().glob("*/*.h")):
        available[f"kernels/{header.relative_to(kernels_dir()).as_posix()}"] = header
    for header in sorted((rt / "include" / "mcu").glob("*.h")):
        if header.name not in _HARNESS_HEADERS:
            available[f"{inc}mcu/{header.name}"] = header
    for d in lib.include_dirs:
        # an external backend's headers (CMSIS-NN's Include/): its sources are shipped, so are the headers they
        # include, else the library compiles only where that tree is on the include path
        for header in sorted(Path(d).rglob("*.h")):
            available.setdefault(f"{inc}{header.relative_to(d).as_posix()}", header)
    include_dirs = [""] + ([include_dir] if include_dir else [])
    headers_needed = include_closure(texts, available, include_dirs)

    sources: list[str] = []
    headers: list[str] = []
    for rel, text in sorted(texts.items()):
        if rel.endswith(".c") and embed_defines and lib.defines:
            text = _define_prelude(lib.defines) + text
        w.text(pre + rel, text)
        (sources if rel.endswith(".c") else headers if rel.endswith(".h") else []).append(rel)
    for rel in headers_needed:
        w.copy(pre + rel, available[rel])
        headers.append(rel)
    shipped = [*texts.values(), *(available[rel].read_text() for rel in headers_needed)]
    needs_libm = any(uses_libm(text) for text in shipped)
    return LibraryTree(sources=sources, headers=headers, include_dirs=include_dirs, needs_libm=needs_libm)


def write_vectors(w: Writer, job: ExportJob, folder: str) -> list[str]:
    """``<prefix>_vectors.{h,c}``: the bundled vectors and a runner the examples call. Returns the .c names."""
    assert job.vectors is not None, "examples need the bundled vectors"
    p = job.lib.prefix
    view = {"m": job.lib.view, "f": job.vectors}
    w.render(f"{folder}/{p}_vectors.h", "targets/common/vectors.h.j2", **view)
    w.render(f"{folder}/{p}_vectors.c", "targets/common/vectors.c.j2", **view)
    return [f"{p}_vectors.c"]
