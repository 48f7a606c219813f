"""Formatting Python values as C source text."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_ELEMENT_TYPES = {"float32": "float", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "uint8": "uint8_t",
                  "int64": "int64_t"}


def c_type(dtype: str) -> str:
    return _ELEMENT_TYPES[dtype]


def c_float(value: float | None, default_inf_sign: int = 0) -> str:
    """A float literal that round-trips float32 exactly (9 significant digits)."""
    if value is None:
        return "-INFINITY" if default_inf_sign < 0 else "INFINITY"
    v = float(np.float32(value))
    if math.isinf(v):
        return "-INFINITY" if v < 0 else "INFINITY"
    if math.isnan(v):
        return "NAN"
    text = f"{v:.9g}"
    if "e" not in text and "." not in text and "n" not in text:
        text += ".0"
    return text + "f"


def c_array_body(data: np.ndarray, per_line: int = 12) -> str:
    """Comma-separated elements of a flat array, several per line."""
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.dtype == np.float32:
        items = [c_float(float(x)) for x in flat.tolist()]
    else:
        items = [str(int(x)) for x in flat.tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines)


def c_initializer(value: Any) -> str:
    """Designated initializer for a dict, braces for a sequence, literal for a scalar."""
    if isinstance(value, dict):
        return "{" + ", ".join(f".{k} = {c_initializer(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "{" + ", ".join(c_initializer(v) for v in value) + "}"
    if isinstance(value, CExpr):
        return value.text
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return c_float(value)
    raise TypeError(f"cannot format {value!r} as C")


class CExpr:
    """Raw C text inside an initializer (e.g. ``INFINITY``)."""

    def __init__(self, text: str) -> None:
        self.text = text


def flat_words(value: object) -> list[int | float]:
    """A params initializer (dict, list or scalar) as its words in declaration order."""
    if isinstance(value, dict):
        return [w for v in value.values() for w in flat_words(v)]
    if isinstance(value, (list, tuple)):
        return [w for v in value for w in flat_words(v)]
    if isinstance(value, bool):
        return [int(value)]
    if isinstance(value, float):
        return [value]
    return [int(value)]  # type: ignore[call-overload]
