"""Shared fixtures. Helpers the tests import by name live in tests/support/ (on pytest's pythonpath)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Callable

import pytest

from compiled import compiled_model
from fake_pico import Pty
from mcu.api import CompiledModel


@pytest.fixture(scope="session")
def compiled() -> Callable[..., CompiledModel]:
    return compiled_model


@pytest.fixture
def pty() -> Iterator[Pty]:
    """A pseudo-terminal playing a board's USB-serial port."""
    master, slave = os.openpty()
    try:
        yield Pty(master=master, slave=slave, port=os.ttyname(slave))
    finally:
        os.close(master)
        os.close(slave)
