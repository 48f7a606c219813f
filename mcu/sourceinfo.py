"""Find the user's own source line behind a graph node."""

from __future__ import annotations

import re
from pathlib import Path

from torch.fx import Node

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)')


def _is_library_file(filename: str) -> bool:
    parts = Path(filename).parts
    return "site-packages" in parts or "dist-packages" in parts or "torch" in parts[-3:-1]


def user_source_line(node: Node) -> str:
    """`` at model.py:12: `x = torch.fft.fft(x)` `` or '' when unknown."""
    trace = node.meta.get("stack_trace") or ""
    frames = _FRAME.findall(trace)
    user = [f for f in frames if not _is_library_file(f[0])]
    if not user:
        return ""
    filename, line, code = user[-1]
    return f" at {Path(filename).name}:{line}: `{code.strip()}`"
