"""Argument types of the ``mcu`` command line: numbers checked where they are parsed, so a bad value is one
line naming the option (``argparse`` adds the option's name to the ArgumentTypeError's text)."""

from __future__ import annotations

import argparse
import math
from typing import NoReturn


def positive_int(text: str) -> int:
    """A whole number of at least 1 (counts: tokens per call, samples)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A finite duration above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise :class:`UsageError` instead of exiting, so ``mcu`` prints
    them as one line (and as JSON under ``--json``) like every other failure."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.prog)


class UsageError(Exception):
    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.message = message
        self.prog = prog

    @property
    def hint(self) -> str:
        """What to do: a missing --board names where the boards are listed, the rest the command's help."""
        if "required" in self.message and "--board" in self.message:
            return "add --board BOARD, e.g. --board mps2-an505 (`mcu boards` lists them)"
        return f"see `{self.prog} --help`"

