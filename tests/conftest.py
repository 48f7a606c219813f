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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of one example model run in one xdist worker (``--dist loadgroup``), so the model is captured,
    quantized and compiled once per (board, mode) instead of once in each worker."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "compiled" not in getattr(item, "fixturenames", ()):
            continue
        model = callspec.params.get("name") or callspec.params.get("example")
        if isinstance(model, str):
            item.add_marker(pytest.mark.xdist_group(model))
