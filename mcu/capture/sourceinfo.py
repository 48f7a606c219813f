"""Find the user's own source line behind a graph node."""

from __future__ import annotations

import re
import sysconfig
import traceback
from pathlib import Path
from types import TracebackType

from torch.fx import Node

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)')


_MCU_DIR = Path(__file__).resolve().parents[1]  # the mcu package, not this folder


def _is_library_file(filename: str) -> bool:
    """torch, other installed packages, and mcu itself (a method wrapper of mcu/program/methods.py is
    never the line the user wrote)."""
    path = Path(filename)
    parts = path.parts
    return ("site-packages" in parts or "dist-packages" in parts or "torch" in parts[-3:-1] or
            _MCU_DIR in path.parents)


def user_frame(tb: TracebackType | None) -> str:
    """`` at model.py:12: `return self.fc2(x)` `` for the innermost frame of a traceback in the
    user's own code (not torch, not mcu), or '' when there is none."""
    skip = (_MCU_DIR, Path(sysconfig.get_paths()["stdlib"]).resolve())
    found = ""
    for frame in traceback.extract_tb(tb):
        path = Path(frame.filename)
        if _is_library_file(frame.filename) or not path.is_file() or any(d in path.resolve().parents for d in skip):
            continue
        found = f" at {path.name}:{frame.lineno}: `{(frame.line or '').strip()}`"
    return found


def user_source_line(node: Node) -> str:
    """`` at model.py:12: `x = torch.fft.fft(x)` `` or '' when unknown."""
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    user = [f for f in frames if not _is_library_file(f[0])]
    if not user:
        return ""
    filename, line, code = user[-1]
    return f" at {Path(filename).name}:{line}: `{code.strip()}`"


def module_path(node: Node) -> str:
    """``features.3: nn.Conv2d`` when ``node`` comes from inside a ``torch.nn`` module, else ''.

    Ops of every layer in an ``nn.Sequential`` share one source line (the call of the container),
    so the line alone cannot tell the user which layer an op is; the module path can."""
    stack = node.meta.get("nn_module_stack") or {}
    module = torch_module_of(node)
    if module is None or not stack:
        return ""
    path = list(stack.values())[-1][0]
    return f"{path}: {module}" if path else module


def op_source(node: Node) -> str:
    """What an op records as its origin: ``model.py:12: `code` (features.3: nn.Conv2d)``."""
    line = user_source_line(node).removeprefix(" at ")
    path = module_path(node)
    if not path:
        return line
    return f"{line} ({path})" if line else path


# Modules that only hold others: the op inside them belongs to a child, never to the container.
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}


def torch_module_of(node: Node) -> str | None:
    """The innermost ``torch.nn`` module (as the user wrote it, e.g. ``nn.LSTM``) that produced
    ``node``, or None when the op came from the user's own code."""
    stack = node.meta.get("nn_module_stack") or {}
    for _path, kind in reversed(list(stack.values())):
        qualname = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
        if not qualname.startswith("torch.nn."):
            return None  # the user's own module is innermost: its ops are the user's code
        name = qualname.rsplit(".", 1)[-1]
        if name not in _CONTAINERS:
            return f"nn.{name}"
    return None


def unsupported_op_message(node: Node, op: str) -> str:
    """Name what the user wrote: ``nn.LSTM at model.py:17 is not supported yet (...)`` when the op
    comes from inside a torch.nn module, else the op and the user's line."""
    module = torch_module_of(node)
    where = user_source_line(node)
    if module is None:
        return f"cannot lower op {op}{where}"
    line = where.removeprefix(" at ").split(": ", 1)
    code = f" (`{line[1].strip('`')}`)" if len(line) == 2 else ""
    at = f" at {line[0]}" if line[0] else ""
    return f"{module}{at} is not supported yet{code}: mcu cannot lower its op {op}"
