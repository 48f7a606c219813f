"""The command line as a user runs it, and the check that a failure is one line starting with "mcu:" and no
traceback.

Two ways to run ``mcu ARGS``, with one signature and one result (a ``CompletedProcess``: returncode, stdout,
stderr as text):
- ``run_mcu``: ``python -m mcu.commands.cli ARGS`` as a real process. For the tests where the process is the
  point: concurrency, signals, a crash's exit code, what a child inherits, the JSON a real process prints.
- ``mcu_in_process``: the CLI's ``main`` called in this process, for the tests that check what a command
  prints and returns. It saves the interpreter start and ``import torch`` (seconds) of every run, captures
  both the Python streams and file descriptors 1 and 2 (compilers, simulators and C code write to the
  descriptors), and puts back everything the command may change (cwd, environment, argv, streams, signal
  handlers, warning filters, logging, torch's global settings and random state, modules a model file
  brought along), so no run sees another's state.
"""

from __future__ import annotations

import io
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def run_mcu(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MCU_DEBUG", None)
    # A fresh folder by default: a command that writes mcu-out/ must not write it into the checkout.
    return subprocess.run([sys.executable, "-m", "mcu.commands.cli", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or tempfile.mkdtemp(prefix="mcu-cli-"), timeout=900)


def mcu_in_process(*args: str, env: dict[str, str] | None = None,
                   cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``run_mcu``'s result, from ``mcu.commands.cli.main`` called here (see the module's docstring)."""
    from mcu.commands.cli import main

    argv = [str(a) for a in args]
    with _process_state_kept(_model_folders(argv, cwd)), _environment(env), _working_folder(cwd), \
            _captured_fds() as captured:
        sys.argv = ["mcu", *argv]
        code = _exit_code(main, argv)
    return subprocess.CompletedProcess([sys.executable, "-m", "mcu.commands.cli", *argv], code,
                                       captured.stdout, captured.stderr)


def _exit_code(main: Any, argv: list[str]) -> int:
    """What the process would exit with: main's return, or SystemExit's code as the interpreter reads it
    (argparse's --help and usage errors leave by SystemExit)."""
    try:
        return int(main(argv) or 0)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1


class _Captured:
    stdout = ""
    stderr = ""


@contextmanager
def _captured_fds() -> Iterator[_Captured]:
    """Descriptors 1 and 2 pointed at files, and sys.stdout/sys.stderr writing to them as a fresh process's
    would (stdout block-buffered, stderr line-buffered, both unbuffered under PYTHONUNBUFFERED), so Python
    and C output interleave as they would."""
    captured = _Captured()
    saved_streams = (sys.stdout, sys.stderr)
    for stream in saved_streams:
        stream.flush()
    saved_fds = {fd: os.dup(fd) for fd in (1, 2)}
    sinks = {fd: tempfile.TemporaryFile(mode="w+b") for fd in (1, 2)}
    try:
        for fd, sink in sinks.items():
            os.dup2(sink.fileno(), fd)
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=unbuffered)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True, write_through=unbuffered)
        repointed = _repoint_log_handlers({id(saved_streams[0]): sys.stdout, id(sys.__stdout__): sys.stdout,
                                           id(saved_streams[1]): sys.stderr, id(sys.__stderr__): sys.stderr})
        try:
            yield captured
        finally:
            for handler, stream in repointed:
                handler.setStream(stream)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):  # a command that closed or broke its stream: nothing left in it
                    pass
    finally:
        sys.stdout, sys.stderr = saved_streams
        for fd, copy in saved_fds.items():
            os.dup2(copy, fd)
            os.close(copy)
        texts = {}
        for fd, sink in sinks.items():
            sink.seek(0)
            texts[fd] = sink.read().decode("utf-8", errors="replace")
            sink.close()
        captured.stdout, captured.stderr = texts[1], texts[2]


def _repoint_log_handlers(streams: dict[int, TextIO]) -> list[tuple[logging.StreamHandler, Any]]:
    """Log handlers made while another sys.stderr was in place (torch makes its own when it is imported, under
    pytest that is pytest's capture) write to the command's streams, as a fresh process's would; returns each
    handler with the stream to put back."""
    repointed = []
    for logger in [logging.getLogger(), *logging.root.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, logging.StreamHandler) and id(handler.stream) in streams:
                repointed.append((handler, handler.setStream(streams[id(handler.stream)])))
    return repointed


@contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env or {})
    os.environ.pop("MCU_DEBUG", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _working_folder(cwd: Path | None) -> Iterator[None]:
    saved = os.getcwd()
    # A fresh folder by default, as run_mcu: a command that writes mcu-out/ must not write it into the checkout.
    os.chdir(cwd or tempfile.mkdtemp(prefix="mcu-cli-"))
    try:
        yield
    finally:
        os.chdir(saved)


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


def _model_folders(argv: list[str], cwd: Path | None) -> list[Path]:
    """The folders of the model files named on the command line: the loader lets a model import helpers there."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    files = [base / a for a in argv if a.endswith(".py")]
    return [f.resolve().parent for f in files if f.is_file()]


@contextmanager
def _process_state_kept(model_folders: list[Path]) -> Iterator[None]:
    """Everything in this process a command may change, put back afterwards."""
    import numpy as np
    import torch

    argv, argv_items, path, path_items = sys.argv, list(sys.argv), sys.path, list(sys.path)
    modules = set(sys.modules)
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    loggers = _logging_state()
    torch_state = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),
                   torch.random.get_rng_state())
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        with warnings.catch_warnings():
            _fresh_warnings()
            yield
    finally:
        argv[:], path[:] = argv_items, path_items
        sys.argv, sys.path = argv, path  # the same lists: others may hold them
        _forget_modules_brought_along(modules, model_folders)
        for s, handler in handlers.items():
            if handler is not None and signal.getsignal(s) is not handler:  # only the main thread may set one
                signal.signal(s, handler)
        _restore_logging(loggers)
        dtype, grad, threads, rng = torch_state
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)
        np.random.set_state(np_state)
        random.setstate(py_state)


def _fresh_warnings() -> None:
    """A fresh interpreter's warning filters, and warnings written to sys.stderr as it writes them: not pytest's
    filters, nor its recorder (a command's warnings are part of what it prints)."""
    warnings.resetwarnings()
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__", append=True)
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category, append=True)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show


def _forget_modules_brought_along(before: set[str], folders: list[Path]) -> None:
    """A model file may import helpers beside it; a later run of a file in another folder that imports a
    helper of the same name must get its own, as a fresh process would. Modules of packages (torch's and
    mcu's lazy imports) stay: importing them twice would make two copies of their classes."""
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and any(Path(file).resolve().is_relative_to(f) for f in folders):
            del sys.modules[name]


def _logging_state() -> dict[str, tuple[int, list[logging.Handler], bool, bool]]:
    loggers: dict[str, logging.Logger] = {"": logging.getLogger()}
    loggers.update({n: lg for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)})
    return {n: (lg.level, list(lg.handlers), lg.disabled, lg.propagate) for n, lg in loggers.items()}


def _restore_logging(state: dict[str, tuple[int, list[logging.Handler], bool, bool]]) -> None:
    for name, (level, handlers, disabled, propagate) in state.items():
        lg = logging.getLogger(name or None)
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.disabled, lg.propagate = disabled, propagate


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("mcu:")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
