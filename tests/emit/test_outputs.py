"""Where commands write their files: a replace-by-rename that never turns a device or a FIFO into a file."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from mcu.emit.outputs import check_file_target, write_atomic


def test_write_atomic_replaces_a_regular_file_and_keeps_a_link(tmp_path: Path) -> None:
    target = tmp_path / "model.mpk"
    target.write_bytes(b"old")
    link = tmp_path / "latest.mpk"
    link.symlink_to(target)
    write_atomic(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.mpk", "model.mpk"]  # no private file left


def test_write_atomic_writes_a_fifo_in_place(tmp_path: Path) -> None:
    """A FIFO stands for /dev/null and other devices (renaming over /dev/null as root put a regular file
    there; the test does not risk the machine's own): the data goes through it and it stays a FIFO."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert check_file_target(fifo) == fifo
    write_atomic(fifo, b"program bytes")
    reader.join(timeout=10)
    assert got == [b"program bytes"] and stat.S_ISFIFO(os.stat(fifo).st_mode)

