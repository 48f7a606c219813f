"""Progress lines for the long steps, and torch's own chatter kept out of the user's way.

The compiler marks its long steps with :func:`stage` (capture, quantize, lower, plan, generate,
compile, link, simulate). Nothing is printed unless a command line installed a :class:`Reporter`
with :func:`reporting`; the library stays silent. The CLI installs one that writes
``mcu: <stage> ... <seconds> s`` to the terminal's stderr, and none with ``--json``, ``--quiet``
or when stderr is not a terminal.

:func:`quiet_torch` runs a block with file descriptors 1 and 2 redirected to a temporary file, so
torch's log lines (written by its logging handlers or by C++ straight to the descriptor),
UserWarnings and FutureWarnings do not land before mcu's one-line error. ``--verbose`` replays
what was captured.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Iterator, TextIO


@dataclass
class Reporter:
    """Where progress lines go (``None``: nowhere) and whether captured torch output is replayed."""

    stream: TextIO | None
    verbose: bool = False
    done: set[str] = field(default_factory=set)  # a stage reached twice (a cached rebuild) prints once

    def line(self, text: str, end: str = "\n") -> None:
        if self.stream is not None:
            self.stream.write(text + end)
            self.stream.flush()


_REPORTER: ContextVar[Reporter | None] = ContextVar("mcu_progress_reporter", default=None)


@contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    token = _REPORTER.set(reporter)
    try:
        yield reporter
    finally:
        _REPORTER.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time one long step; on a terminal, ``mcu: capture ... 2.1 s``."""
    rep = _REPORTER.get()
    if rep is None or rep.stream is None or name in rep.done:
        yield
        return
    rep.done.add(name)
    rep.line(f"mcu: {name:<9}...", end="")
    start = time.monotonic()
    try:
        yield
    except BaseException:
        rep.line(" failed")
        raise
    rep.line(f" {time.monotonic() - start:.1f} s")


def note(name: str, text: str) -> None:
    """A stage that had nothing to do (``mcu: compile  up to date``)."""
    rep = _REPORTER.get()
    if rep is None or rep.stream is None or name in rep.done:
        return
    rep.done.add(name)
    rep.line(f"mcu: {name:<9}... {text}")


def terminal_stream(stream: TextIO) -> TextIO | None:
    return stream if stream.isatty() else None


@contextmanager
def quiet_torch(verbose: bool) -> Iterator[None]:
    """Run a block with stdout and stderr (the descriptors, not only the Python objects) captured.

    Progress lines still reach the terminal: the reporter's stream is re-pointed at a copy of the
    original stderr for the duration. With ``verbose`` the captured text is replayed on stderr
    afterwards, also when the block fails (before the CLI's error line).
    """
    rep = _REPORTER.get()
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    sink = tempfile.TemporaryFile(mode="w+b")
    progress_stream = rep.stream if rep is not None else None
    if rep is not None and rep.stream is not None:
        rep.stream = os.fdopen(os.dup(saved[2]), "w", closefd=True)
    try:
        for fd in (1, 2):
            os.dup2(sink.fileno(), fd)
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # every warning reaches the sink once, none the terminal
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        if rep is not None and rep.stream is not None and rep.stream is not progress_stream:
            rep.stream.close()
            rep.stream = progress_stream
        if verbose:
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            if text:
                sys.stderr.write(text if text.endswith("\n") else text + "\n")
                sys.stderr.flush()
        sink.close()
