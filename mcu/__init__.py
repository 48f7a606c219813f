"""mcu: PyTorch models on microcontrollers."""

from __future__ import annotations

from mcu.errors import McuError

__version__ = "0.1.0"

__all__ = ["McuError", "__version__", "compile"]


def compile(model, example_inputs, board: str = "mps2-an505", quantize: str = "none", **kwargs):  # noqa: A001
    """Compile ``model`` for ``board``; see :func:`mcu.api.compile`."""
    from mcu.api import compile as _compile

    return _compile(model, example_inputs, board=board, quantize=quantize, **kwargs)
