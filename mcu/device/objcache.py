"""Compiled objects shared between builds, keyed by content.

Most of a firmware's compile time goes to the same kernel, port and runtime sources that every other
firmware for that board compiles with the same flags; only the generated model differs. This cache lets
a build reuse another build's object for such a source, the way ccache's direct mode does:

* the lookup key hashes the compiler's identity, every flag (include folders and definitions among them),
  the source's path and its bytes;
* under that key a manifest lists every file the compiler read for it (its ``-MMD`` dependencies) with
  their SHA-256, and the object is reused only while each of those still has that digest, so an edited
  header is a miss.

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
# Side outputs a compile may write next to its object (-MMD, -fstack-usage), kept with the entry.
SIDE_SUFFIXES: tuple[str, ...] = (".d", ".su")


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


@dataclass(frozen=True)
class ObjectCache:
    root: Path

    @classmethod
    def default(cls) -> ObjectCache:
        return cls(paths.cache_dir() / "objects")

    def key(self, compiler: str, flags: Sequence[str], source: Path) -> str:
        h = hashlib.sha256()
        for part in (_LAYOUT, compiler, *flags, "--", str(source), file_digest(source)):
            h.update(part.encode() + b"\0")
        return h.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def _current(self, entry: Path) -> dict | None:
        """The entry's manifest while every file it was compiled from still has its digest, else None."""
        try:
            manifest = json.loads((entry / "manifest.json").read_text())
            if all(file_digest(Path(dep)) == digest for dep, digest in manifest["deps"].items()):
                return manifest
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        return None

    def fetch(self, key: str, obj: Path) -> bool:
        """Copy the entry's object (and its side outputs) to ``obj``; False when there is no entry or a file it
        was compiled from has changed since."""
        entry = self._entry(key)
        manifest = self._current(entry)
        if manifest is None:
            return False
        try:
            for suffix in manifest["files"]:
                shutil.copyfile(entry / f"object{suffix}", obj.with_suffix(suffix))
        except (OSError, KeyError, TypeError):
            return False
        return True

    def store(self, key: str, obj: Path) -> None:
        """Keep ``obj`` and its side outputs under ``key``; its ``.d`` file names what it was compiled from."""
        depfile = obj.with_suffix(".d")
        deps = {str(Path(d).resolve()): file_digest(Path(d)) for d in parse_depfile(depfile.read_text())}
        suffixes = [".o", *(s for s in SIDE_SUFFIXES if obj.with_suffix(s).is_file())]
        entry = self._entry(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=entry.parent))
        try:
            for suffix in suffixes:
                shutil.copyfile(obj.with_suffix(suffix), staging / f"object{suffix}")
            (staging / "manifest.json").write_text(json.dumps({"deps": deps, "files": suffixes}))
            if entry.exists():
                if self._current(entry) is not None:  # another build stored it meanwhile
                    return
                shutil.rmtree(entry, ignore_errors=True)  # stale (a header changed): this compile replaces it
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
        key = cache.key(identity, unit.flags, unit.source) if unit.shared else None
        if key is not None and cache.fetch(key, obj):
            return obj
        run([str(compiler), *unit.flags, "-MMD", "-MF", str(obj.with_suffix(".d")),
             "-c", str(unit.source), "-o", str(obj)], unit.source)
        if key is not None:
            cache.store(key, obj)
        return obj

    workers = max(1, min(len(units), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, enumerate(units)))
