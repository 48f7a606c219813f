"""Where commands write: output folders and files checked up front, and one build per folder at a time.

A bad ``-o`` is the user's to fix, so it is an :class:`McuError` naming the path
(exit 2), never an OSError from deep inside a build. Two builds into the same
folder would mix their sources and leave one ELF under the other's report, so a
build holds an exclusive lock on its folder (``flock`` on ``.mcu-build.lock``;
the kernel drops it when the process ends, so a killed build leaves no stale
lock) and a second build fails at once saying which process holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from mcu.errors import McuError
import hashlib
from mcu.paths import cache_dir, kernel_source, runtime_dir

LOCK_NAME = ".mcu-build.lock"


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` (itself included) when it is not a folder."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return None if p.is_dir() else p
    return None


def ensure_dir(path: Path, what: str = "output folder") -> Path:
    """Create ``path`` (and its parents) as a folder, or say in one line why it cannot be one."""
    path = Path(path)
    blocker = _blocking_file(path)
    if blocker == path:
        raise McuError(f"{what} {path} is a file, not a folder",
                       hint="pass a folder with -o, or remove or rename the file")
    if blocker is not None:
        raise McuError(f"cannot create {what} {path}: {blocker} is a file, not a folder",
                       hint="pass -o a path whose parents are folders")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise McuError(f"cannot create {what} {path}: {reason}",
                       hint="pass -o a folder you can write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise McuError(f"cannot write into {what} {path}: permission denied",
                       hint="pass -o a folder you can write to")
    return path


def check_file_target(path: Path, what: str = "output file", example: str = "model.mpk") -> Path:
    """``path`` can be written as a file: not a folder, and its folder can be created."""
    path = Path(path)
    if path.is_dir():
        raise McuError(f"{what} {path} is a folder",
                       hint=f"-o names the file to write, e.g. {path / example}")
    if _special(path):  # /dev/null, a FIFO: written in place, its folder is not ours to probe
        if not os.access(path, os.W_OK):
            raise McuError(f"cannot write the {what} {path}: permission denied",
                           hint="pass -o a path you can write to")
        return path
    folder = ensure_dir(path.parent, what=f"folder of the {what}")
    # Permission bits do not tell everything (root, read-only mounts, /proc): try, before any work is done.
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise McuError(f"cannot write the {what} {path}: {exc.strerror or type(exc).__name__}",
                       hint="pass -o a path in a folder you can write to") from None
    return path


def _special(path: Path) -> bool:
    """An existing target that is not a regular file (a device such as /dev/null, a FIFO), links followed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a private file in the same folder renamed over it, so a reader
    (or a concurrent writer) never sees a half-written file. A link is followed (the file it names is
    replaced, the link stays); a device or FIFO is written in place: renaming over /dev/null as root
    would put a regular file where the device was."""
    path = Path(os.path.realpath(path))
    if _special(path):
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise McuError(f"cannot write {path}: {exc.strerror or type(exc).__name__}",
                           hint="pass -o a path you can write to") from None
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise McuError(f"cannot write {path}: {exc.strerror or type(exc).__name__}",
                       hint="pass -o a path in a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise McuError(f"cannot write {path}: {exc.strerror or type(exc).__name__}",
                       hint="pass -o a path with room, in a folder you can write to") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def build_lock(out_dir: Path, wait: bool = False) -> Iterator[Path]:
    """Hold the exclusive build lock of ``out_dir`` (created if needed) for the ``with`` block.

    ``wait=False`` (a folder the user named): a second build fails at once with an McuError.
    ``wait=True`` (the shared cache, keyed by content): it waits for the first to finish.
    """
    out_dir = ensure_dir(Path(out_dir))
    lock_path = out_dir / LOCK_NAME
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            holder = f"pid {pid}" if pid else "starting"
            raise McuError(f"output folder {out_dir} is in use by another mcu build ({holder})",
                           hint="wait for it to finish, or pass a different -o") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield out_dir
    finally:
        os.close(fd)


def cached_build_dir(board_name: str, prefix: str, files: dict[str, str],
                     defines: dict[str, int] | None = None) -> Path:
    """The build cache's folder for these generated files and compile definitions (content-keyed:
    equal files and definitions, one build)."""
    key = "".join(f"{k}\0{v}" for k, v in sorted(files.items()))
    if defines:
        key += "\0defines\0" + " ".join(f"-D{k}={v}" for k, v in sorted(defines.items()))
    digest = hashlib.sha256(key.encode()).hexdigest()
    return cache_dir() / "firmware" / board_name / f"{prefix}-{digest[:20]}"


def stage_sources(out_dir: Path, files: dict[str, str], library: Any) -> tuple[list[Path], list[Path]]:
    """Write the generated ``files`` into ``out_dir/src`` (unchanged files keep their time stamps, files of
    an earlier build there are removed) and return the sources and include folders of a firmware build
    with ``library``'s kernels and runtime (a mcu.emit.c_model.GeneratedLibrary)."""
    ensure_dir(out_dir)
    src = Path(out_dir) / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = src / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    for stale in src.iterdir():
        if stale.is_file() and stale.name not in files:
            stale.unlink()
    rt = runtime_dir()
    sources = [src / n for n in files if n.endswith(".c")]
    sources += [kernel_source(s) for s in library.kernel_sources]
    sources += [rt / s for s in library.runtime_sources]
    return sources, [src, rt / "include", *map(Path, library.include_dirs)]
