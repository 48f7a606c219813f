"""Compiled objects shared between builds, keyed by what the compiler compiles.

Most of a firmware's compile time goes to the same kernel, port and runtime sources that every other
firmware for that board compiles; only the generated model differs. The models' definitions (``-D``) differ
too, but most sources use none of them. So an object is keyed as ccache's preprocessor mode keys it:

* the source is preprocessed (``-E``, cheap next to compiling; its ``-MMD`` file names the headers read, as
  the build's stamp needs);
* the key hashes the compiler's identity, the flags that act after preprocessing (``-D``, ``-U`` and include
  folders are left out: the preprocessed text holds their effect), the source's path and the preprocessed
  text (with gcc, with ``-dU``: see below);
* an object compiled from the same text with the same code flags is the same object.

In front of it sits a direct mode (as ccache's): a manifest keyed by the compiler, its flags, the source's
path and bytes records, for each set of headers seen, every header the ``-MMD`` file named with its content
hash, where each ``#include`` name in the source and those headers resolved, and the preprocessed key. When
every recorded header hashes the same and every name still resolves to the same file, the preprocessed
text would be the same, so the object is taken without running the compiler at all; otherwise the source is
preprocessed as above and the manifest gains a record.

Models pass their own definitions to every source, so a key holding every ``-D`` would be new for each model
although most sources read none of them. With gcc the key leaves ``-D``/``-U`` out: the preprocessing run
adds ``-dU`` (a ``#define``/``#undef`` line for every macro expanded or tested, the text the preprocessed
key hashes), and the record keeps every name a definition could change: the identifiers of that text (the
macros consulted, and the words that would expand if defined) and the names the recorded files
``#define``. A lookup takes a record only when each command-line definition of one of those names is the
one recorded; a definition of any other name cannot change the text.

A source is left to the preprocessor mode when something the manifest cannot see could change its text:
``__DATE__``/``__TIME__``/``__TIMESTAMP__``, an ``#include`` of a macro or ``#include_next`` outside the
compiler's own headers, ``-isystem`` and other include options whose headers the ``-MMD`` file leaves out,
relative paths (they depend on the working folder), a macro given twice on the command line, or a header
written less than a second before the compile (its hash might not be what the preprocessor read). The
compiler's own headers (which the ``-MMD`` file leaves out, with the names they include) are vouched for by
its identity, as the build stamp does.

Entries and manifests are written to temporary names and renamed into place, so parallel builds (pytest
workers, the matrix) can share one cache: a reader sees a whole entry or none, and a manifest update lost
to a concurrent writer only costs a later preprocessing run. A compile holds a lock on its key (``flock``,
released when the process ends, even when killed): a second build wanting the same object meanwhile waits
for it and takes it from the cache instead of compiling the same text again.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mcu import paths

# Bump when what an entry holds changes in a way the key cannot see.
_LAYOUT = "2"
_DIRECT_LAYOUT = "2"
# Side outputs a compile may write next to its object (-fstack-usage), kept with the entry.
SIDE_SUFFIXES: tuple[str, ...] = (".su",)
# Records kept per manifest: a source built against a few versions of its headers, or with a few values of the
# definitions it reads, keeps each.
_RECORDS_KEPT = 16
# A file changed this recently may have changed while the preprocessor read it; its hash vouches for
# nothing. Filesystem clocks lag the system clock by up to a tick, far less than this.
SETTLED_NS = 1_000_000_000
# Environment the preprocessor reads: it changes the text without changing the flags.
_PREPROCESSOR_ENV = ("CPATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH", "SOURCE_DATE_EPOCH")


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


def write_depfile(path: Path, target: Path, deps: Sequence[str]) -> None:
    """A ``-MMD`` file naming ``deps`` (read back by :func:`parse_depfile`)."""
    path.write_text(f"{target}: " + " \\\n ".join(d.replace(" ", "\\ ") for d in deps) + "\n")


# Flags whose whole effect is on the preprocessed text (joined forms, as the builds pass them).
_PREPROCESSOR_FLAGS = ("-D", "-U", "-I", "-iquote", "-isystem")


def code_flags(flags: Sequence[str]) -> list[str]:
    """The flags that still act once the source is preprocessed."""
    return [f for f in flags if not f.startswith(_PREPROCESSOR_FLAGS)]


# --- direct mode: what a source and its headers include, and where those names lead -------------------

_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.?)", re.MULTILINE)
_NAMED = re.compile(rb"""^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)""", re.MULTILINE)
_HAS_INCLUDE = re.compile(rb"""__has_include[ \t]*\([ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[ \t]*\)""")
_CLOCK_MACROS = (b"__DATE__", b"__TIME__", b"__TIMESTAMP__")
_DEFINES = re.compile(rb"^[ \t]*#[ \t]*(?:define|undef)[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_PASTED_PREFIX = re.compile(rb"\b([A-Za-z_][A-Za-z0-9_]*)\s*##")
_MACRO_FLAG = re.compile(r"-([DU])([A-Za-z_][A-Za-z0-9_]*)(?:$|[=(])")


def reports_macros(compiler: str) -> bool:
    """Whether the compiler's ``-E -dU`` lists the macros the text consulted (gcc; clang takes the option
    and prints nothing)."""
    name = Path(compiler).name
    return "gcc" in name and "clang" not in name


def command_line_macros(flags: Sequence[str]) -> dict[str, str] | None:
    """Name -> its ``-D`` (``NAME=value`` as written) or ``-U`` (``"-U"``); None when a name is given twice
    (the order between them would matter) or a flag names no macro."""
    macros: dict[str, str] = {}
    for flag in flags:
        if not flag.startswith(("-D", "-U")):
            continue
        match = _MACRO_FLAG.match(flag)
        if match is None or match.group(2) in macros:
            return None
        macros[match.group(2)] = flag[2:] if match.group(1) == "D" else "-U"
    return macros


@dataclass(frozen=True)
class SearchPath:
    """The include folders of a compile, in gcc's order: ``#include "x"`` looks in the including file's folder,
    then ``quote``, then ``angle``; ``#include <x>`` only in ``angle``. The compiler's own folders come after
    both and are left out: a name found nowhere here resolves to None."""

    quote: tuple[str, ...]
    angle: tuple[str, ...]

    @classmethod
    def of(cls, flags: Sequence[str]) -> SearchPath | None:
        """None when the flags name headers the ``-MMD`` file would not list or paths relative to the working
        folder."""
        quote: list[str] = []
        angle: list[str] = []
        for flag in flags:
            if flag.startswith("-iquote"):
                folder, into = flag[len("-iquote"):], quote
            elif flag.startswith("-I"):
                folder, into = flag[2:], angle
            elif flag.startswith(("-i", "--include", "--sysroot", "-nostdinc")):
                return None  # -isystem, -idirafter, -include, -imacros, ...: not followed here
            else:
                continue
            if not os.path.isabs(folder):
                return None
            into.append(folder)
        return cls(tuple(quote), tuple(angle))

    def resolve(self, including: str, quoted: bool, name: str) -> str | None:
        folders = [os.path.dirname(including), *self.quote, *self.angle] if quoted else self.angle
        for folder in folders:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
        return None


def included_names(text: bytes) -> list[tuple[bool, str]] | None:
    """Every ``(quoted, name)`` the text may include (taken branch or not), None when the text holds something
    the direct mode cannot follow."""
    if any(m in text for m in _CLOCK_MACROS) or b"__has_include_next" in text:
        return None
    for directive in _DIRECTIVE.finditer(text):
        if directive.group(1) != b"include" or directive.group(2) not in (b'"', b"<"):
            return None
    probes = list(_HAS_INCLUDE.finditer(text))
    if text.count(b"__has_include") != len(probes):  # a probe of a macro's name, or of something else
        return None
    found = [*_NAMED.finditer(text), *probes]
    names = {(m.group(1) is not None, (m.group(1) or m.group(2)).decode("utf-8", "surrogateescape")) for m in found}
    return sorted(names)


@dataclass(frozen=True)
class _Facts:
    digest: str  # SHA-256 of the bytes
    includes: list[tuple[bool, str]] | None  # included_names
    defines: frozenset[str]  # names the file #defines or #undefs
    changed: int  # last change, ns since the epoch


@dataclass
class _Files:
    """What the direct mode needs of the files one :func:`compile_each` call reads, each file read once."""

    known: dict[tuple[str, tuple[int, ...]], _Facts] = field(default_factory=dict)

    def read(self, path: str) -> _Facts:
        st = os.stat(path)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        facts = self.known.get((path, stamp))
        if facts is not None:
            return facts
        text = Path(path).read_bytes()
        facts = _Facts(hashlib.sha256(text).hexdigest(), included_names(text),
                       frozenset(m.decode() for m in _DEFINES.findall(text)), max(st.st_mtime_ns, st.st_ctime_ns))
        after = os.stat(path)
        if (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) != stamp:
            # written while read: the hash matches no settled version of the file
            return dataclasses.replace(facts, changed=time.time_ns())
        self.known[(path, stamp)] = facts
        return facts


@dataclass(frozen=True)
class Direct:
    """A shared unit's direct-mode lookup: its manifest key, include folders and, when the key leaves the
    definitions out, the command line's macros."""

    key: str
    search: SearchPath
    macros: dict[str, str] | None


@dataclass(frozen=True)
class _Record:
    """One set of headers a source was preprocessed with, and the preprocessed key it gave."""

    object_key: str
    deps: tuple[str, ...]  # the -MMD file's list, in its order (the source first)
    digests: dict[str, str]  # every dep -> SHA-256
    includes: tuple[tuple[str, bool, str, str | None], ...]  # (including file, quoted, name, resolved file)
    # When the manifest's key leaves the definitions out: every name a definition could change the text by,
    # and the command line's macros among them.
    names: frozenset[str] | None
    macros: dict[str, str]
    # Prefixes a dep pastes a macro's name onto (``PREFIX_##name``): the names it builds that way appear in no
    # text, so every command-line macro that starts with one counts, whether the recorded compile had it or not.
    pasted: tuple[str, ...] = ()

    def relevant(self, name: str) -> bool:
        return self.names is not None and (name in self.names or name.startswith(self.pasted))

    def holds(self, files: _Files, direct: Direct) -> bool:
        if self.names is not None:
            assert direct.macros is not None
            if any(self.relevant(name) and direct.macros.get(name) != self.macros.get(name)
                   for name in {*direct.macros, *self.macros}):
                return False
        try:
            if any(files.read(dep).digest != digest for dep, digest in self.digests.items()):
                return False
        except OSError:
            return False
        return all(direct.search.resolve(including, quoted, name) == resolved
                   for including, quoted, name, resolved in self.includes)

    def to_json(self) -> dict:
        return {"object": self.object_key, "deps": list(self.deps), "digests": self.digests,
                "includes": [list(i) for i in self.includes],
                "names": None if self.names is None else sorted(self.names), "macros": self.macros,
                "pasted": list(self.pasted)}

    @classmethod
    def from_json(cls, data: dict) -> _Record:
        names = data["names"]
        return cls(data["object"], tuple(data["deps"]), dict(data["digests"]),
                   tuple((str(a), bool(b), str(c), d) for a, b, c, d in data["includes"]),
                   None if names is None else frozenset(names), dict(data["macros"]), tuple(data.get("pasted", ())))


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

    def direct_key(self, compiler: str, flags: Sequence[str], source: Path, source_digest: str) -> str:
        """``flags``: without the definitions when the records keep the names they could change."""
        h = hashlib.sha256()
        env = [f"{name}={os.environ.get(name, '')}" for name in _PREPROCESSOR_ENV]
        for part in (_DIRECT_LAYOUT, compiler, *env, "--", *flags, "--", str(source), source_digest):
            h.update(part.encode() + b"\0")
        return h.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def _manifest(self, direct_key: str) -> Path:
        return self.root / "direct" / direct_key[:2] / f"{direct_key}.json"

    @contextmanager
    def claim(self, key: str) -> Iterator[None]:
        """Hold the key's lock for the ``with`` block: one process or thread compiles an object at a time, and
        the others find it stored when they get the lock."""
        path = self.root / "locks" / key[:2] / key
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

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

    def _records(self, direct_key: str) -> list[_Record]:
        try:
            data = json.loads(self._manifest(direct_key).read_text())
            return [_Record.from_json(r) for r in data["records"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def direct_fetch(self, direct: Direct, files: _Files, obj: Path) -> bool:
        """Copy the object of the first record whose headers and definitions are unchanged to ``obj`` and write
        its ``-MMD`` file; False when no record holds (or its object is gone)."""
        for record in self._records(direct.key):
            if record.holds(files, direct) and self.fetch(record.object_key, obj):
                write_depfile(obj.with_suffix(".d"), obj, record.deps)
                return True
        return False

    def direct_record(self, direct: Direct, object_key: str, deps: Sequence[str], files: _Files,
                      started_ns: int, preprocessed: bytes) -> None:
        """Add to the manifest that the source with ``deps`` as read by a preprocessing run started at
        ``started_ns`` gave ``object_key`` (and the text ``preprocessed``, with ``-dU`` when the key leaves
        the definitions out); nothing when a dep cannot be vouched for."""
        digests: dict[str, str] = {}
        includes: set[tuple[str, bool, str, str | None]] = set()
        defined: set[str] = set()
        for dep in deps:
            if not os.path.isabs(dep):
                return
            try:
                facts = files.read(dep)
            except OSError:
                return
            if facts.includes is None or facts.changed >= started_ns - SETTLED_NS:
                return
            digests[dep] = facts.digest
            defined |= facts.defines
            includes.update((dep, quoted, name, direct.search.resolve(dep, quoted, name))
                            for quoted, name in facts.includes)
        names = None
        macros: dict[str, str] = {}
        pasted: tuple[str, ...] = ()
        if direct.macros is not None:
            names = frozenset(defined | {m.decode() for m in _IDENTIFIER.findall(preprocessed)})
            pasted = tuple(sorted({m.decode() for dep in deps
                                   for m in _PASTED_PREFIX.findall(Path(dep).read_bytes())}))
            macros = {name: state for name, state in direct.macros.items()
                      if name in names or name.startswith(pasted)}
        record = _Record(object_key, tuple(deps), digests, tuple(sorted(includes, key=str)), names, macros, pasted)
        kept = [r for r in self._records(direct.key) if (r.digests, r.macros) != (record.digests, record.macros)]
        records = [record, *kept][:_RECORDS_KEPT]
        path = self._manifest(direct.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{direct.key[:12]}-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"records": [r.to_json() for r in records]}, f)
            os.replace(tmp, path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)


@dataclass(frozen=True)
class Compile:
    """One source to compile: its flags (without -c/-o), and whether its object may be shared."""

    source: Path
    flags: Sequence[str]
    shared: bool


def _direct(cache: ObjectCache, identity: str, unit: Compile, macro_aware: bool) -> Direct | None:
    search = SearchPath.of(unit.flags)
    macros = command_line_macros(unit.flags) if macro_aware else None
    if search is None or not unit.source.is_absolute() or (macro_aware and macros is None):
        return None
    flags = [f for f in unit.flags if not f.startswith(("-D", "-U"))] if macro_aware else list(unit.flags)
    digest = hashlib.sha256(unit.source.read_bytes()).hexdigest()
    return Direct(cache.direct_key(identity, flags, unit.source, digest), search, macros)


def compile_each(compiler: Path | str, units: Sequence[Compile], work: Path,
                 run: Callable[[list[str], Path], None]) -> list[Path]:
    """Every unit compiled in parallel into ``work`` (``NNN-<stem>.o`` with its ``.d``), shared units through
    the cache. ``run(command, source)`` runs the compiler and raises on failure."""
    cache = ObjectCache.default()
    identity = compiler_identity(compiler)
    macro_aware = reports_macros(identity.split("\0")[0])
    files = _Files()

    def one(index_unit: tuple[int, Compile]) -> Path:
        index, unit = index_unit
        # The index keeps objects apart when two sources share a file name.
        obj = work / f"{index:03d}-{unit.source.stem}.o"
        depfile = ["-MMD", "-MF", str(obj.with_suffix(".d"))]
        key = None
        if unit.shared:
            # Before the source is read for the direct key: a change after this reaches no record.
            started = time.time_ns()
            direct = _direct(cache, identity, unit, macro_aware)
            if direct is not None and cache.direct_fetch(direct, files, obj):
                return obj
            preprocessed = obj.with_suffix(".i")
            dump = ["-dU"] if macro_aware else []
            run([str(compiler), *unit.flags, *depfile, "-E", *dump, str(unit.source), "-o", str(preprocessed)],
                unit.source)
            key = cache.key(identity, unit.flags, unit.source, preprocessed)
            if direct is not None:
                deps = parse_depfile(obj.with_suffix(".d").read_text())
                cache.direct_record(direct, key, deps, files, started, preprocessed.read_bytes())
            preprocessed.unlink()
            with cache.claim(key):
                if not cache.fetch(key, obj):
                    run([str(compiler), *unit.flags, *depfile, "-c", str(unit.source), "-o", str(obj)], unit.source)
                    cache.store(key, obj, unit.source)
            return obj
        run([str(compiler), *unit.flags, *depfile, "-c", str(unit.source), "-o", str(obj)], unit.source)
        return obj

    workers = max(1, min(len(units), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, enumerate(units)))
