"""mcu: PyTorch models on microcontrollers."""

from __future__ import annotations

from mcu.errors import McuError
from mcu.version import __version__
import sys
from pathlib import Path

__all__ = ["McuError", "__version__", "compile", "custom_op"]


def compile(model, example_inputs, board: str = "mps2-an505", quantize: str = "none", **kwargs):  # noqa: A001
    """Compile ``model`` for ``board``; see :func:`mcu.api.compile`."""
    # lazy: `import mcu` stays light (no torch, no numpy) until a model is compiled
    from mcu.api import compile as _compile

    return _compile(model, example_inputs, board=board, quantize=quantize, **kwargs)


def custom_op(name: str, **kwargs):
    """Register a ``torch.library`` op's C kernel with mcu; see :func:`mcu.capture.custom_ops.custom_op`."""
    # lazy: `import mcu` stays light (no torch, no numpy) until a model is compiled
    from mcu.capture.custom_ops import custom_op as _custom_op

    # paths are relative to the file that calls this, not to mcu.capture.custom_ops
    kwargs.setdefault("base", Path(sys._getframe(1).f_code.co_filename).resolve().parent)
    return _custom_op(name, **kwargs)
