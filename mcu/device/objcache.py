"""Compiled objects shared between builds, keyed by what the compiler compiles.

Most of a firmware's compile time goes to the same kernel, port and runtime sources that every other
firmware for that board compiles; only the generated model differs. The models' definitions (``-D``) differ
too, but most sources use none of them. So the key is the one ccache's preprocessor mode uses:

* the source is preprocessed (``-E``, cheap next to compiling; its ``-MMD`` file names the headers read, as
  the build's stamp needs);
* the key hashes the compiler's identity, the flags that act after preprocessing (``-D``, ``-U`` and include
  folders are left out: the preprocessed text holds their effect), the source's path and the preprocessed
  text;
* an object compiled from the same text with the same code flags is the same object.

Entries are written to temporary names and renamed into place, manifest last, so parallel builds (pytest
workers, the matrix) can share one cache: a reader sees a whole entry or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mcu import paths

# Bump when what an entry holds changes in a way the key cannot see.
_LAYOUT = "1"
# Side outputs a compile may write next to its object (-fstack-usage), kept with the entry.
SIDE_SUFFIXES: tuple[str, ...] = (".su",)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def compiler_identity(compiler: Path | str) -> str:
    """The driver binary stands in for the toolchain: an upgrade replaces it (size or time changes)."""
    found = shutil.which(str(compiler))
    if found is None:
        raise FileNotFoundError(f"compiler {compiler} not found")
    path = Path(found).resolve()
    st = path.stat()
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}"


def parse_depfile(text: str) -> list[str]:
    """Prerequisites from a gcc ``-MMD`` file (``target: dep dep \\`` lines)."""
    body = text.replace("\\\n", " ")
    deps: list[str] = []
    for line in body.splitlines():
        _, sep, rest = line.partition(": ")
        if not sep:
            continue
        # Spaces inside a path are escaped as "\ ".
        for token in re.split(r"(?<!\\)\s+", rest.strip()):
            if token:
                deps.append(token.replace("\\ ", " "))
    return deps


# Flags whose whole effect is on the preprocessed text (joined forms, as the builds pass them).
_PREPROCESSOR_FLAGS = ("-D", "-U", "-I", "-iquote", "-isystem")


def code_flags(flags: Sequence[str]) -> list[str]:
    """The flags that still act once the source is preprocessed."""
    return [f for f in flags if not f.startswith(_PREPROCESSOR_FLAGS)]


@dataclass(frozen=True)
class ObjectCache:
    root: Path

    @classmethod
    def default(cls) -> ObjectCache:
        return cls(paths.cache_dir() / "objects")

    def key(self, compiler: str, flags: Sequence[str], source: Path, preprocessed: Path) -> str:
        h = hashlib.sha256()
        for part in (_LAYOUT, compiler, *code_flags(flags), "--", str(source), file_digest(preprocessed)):
            h.update(part.encode() + b"\0")
        return h.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def fetch(self, key: str, obj: Path) -> bool:
        """Copy the entry's object (and its stack-usage file) to ``obj``; False when there is none."""
        entry = self._entry(key)
        try:
            manifest = json.loads((entry / "manifest.json").read_text())
            for suffix in manifest["files"]:
                shutil.copyfile(entry / f"object{suffix}", obj.with_suffix(suffix))
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return True

    def store(self, key: str, obj: Path, source: Path) -> None:
        """Keep ``obj`` (and its stack-usage file) under ``key``."""
        suffixes = [".o", *(s for s in SIDE_SUFFIXES if obj.with_suffix(s).is_file())]
        entry = self._entry(key)
        if entry.exists():  # another build stored it meanwhile
            return
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=entry.parent))
        try:
            for suffix in suffixes:
                shutil.copyfile(obj.with_suffix(suffix), staging / f"object{suffix}")
            (staging / "manifest.json").write_text(json.dumps({"source": str(source), "files": suffixes}))
            try:
                os.rename(staging, entry)
            except OSError:  # another build stored the same key meanwhile: keep theirs
                pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class Compile:
    """One source to compile: its flags (without -c/-o), and whether its object may be shared."""

    source: Path
    flags: Sequence[str]
    shared: bool


def compile_each(compiler: Path | str, units: Sequence[Compile], work: Path,
                 run: Callable[[list[str], Path], None]) -> list[Path]:
    """Every unit compiled in parallel into ``work`` (``NNN-<stem>.o`` with its ``.d``), shared units through
    the cache. ``run(command, source)`` runs the compiler and raises on failure."""
    cache = ObjectCache.default()
    identity = compiler_identity(compiler)

    def one(index_unit: tuple[int, Compile]) -> Path:
        index, unit = index_unit
        # The index keeps objects apart when two sources share a file name.
        obj = work / f"{index:03d}-{unit.source.stem}.o"
        depfile = ["-MMD", "-MF", str(obj.with_suffix(".d"))]
        key = None
        if unit.shared:
            preprocessed = obj.with_suffix(".i")
            run([str(compiler), *unit.flags, *depfile, "-E", str(unit.source), "-o", str(preprocessed)], unit.source)
            key = cache.key(identity, unit.flags, unit.source, preprocessed)
            preprocessed.unlink()
            if cache.fetch(key, obj):
                return obj
        run([str(compiler), *unit.flags, *depfile, "-c", str(unit.source), "-o", str(obj)], unit.source)
        if key is not None:
            cache.store(key, obj, unit.source)
        return obj

    workers = max(1, min(len(units), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, enumerate(units)))
