"""Shared fixtures. Helpers the tests import by name live in tests/support/ (on pytest's pythonpath)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest
import torch

from compiled import compiled_model
from fake_pico import Pty
from mcu.api import CompiledModel

# One intra-op thread per test process: the suite runs one process per core (xdist), and torch's second thread
# in each spins waiting for the other's core; the test models' tensors are too small to gain from it. With two,
# lowering three of the w8a16 attention models took 13.9 CPU seconds on a busy machine, with one 5.0 (the same
# lowered graphs).
torch.set_num_threads(1)


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


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")
SECONDS_LIST = Path(__file__).with_name("test_seconds.txt")


def _listed_slow() -> set[str]:
    if not SLOW_LIST.exists():
        return set()
    return {ln.strip() for ln in SLOW_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}


def _measured_seconds() -> dict[str, float]:
    """The seconds tests/test_seconds.txt gives each test (scripts/test_tiers; the short ones are left out)."""
    if not SECONDS_LIST.exists():
        return {}
    rows = (ln.rpartition(" ") for ln in SECONDS_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#"))
    return {node: float(seconds) for node, _, seconds in rows}


def pytest_configure(config: pytest.Config) -> None:
    # xdist hands out groups in collection order, which pytest_collection_modifyitems makes longest first;
    # its own reordering (most tests first) put groups of few but long tests last, the run's tail.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before -m selects by the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of one example model run in one xdist worker (``--dist loadgroup``), so the model is captured,
    lowered once per mode and compiled once per (board, mode) instead of once in each worker: those taking the
    ``compiled`` fixture, and those of a module that sets ``GROUP_BY_EXAMPLE`` (it calls tests/support/compiled.py
    itself). Every other test without a group of its own runs in the worker of its module, so what a module
    builds once for its tests (module-scoped fixtures, its own caches of compiled models and host libraries) is
    built in one worker, not in both. The tests listed in slow_tests.txt (measured, scripts/test_tiers) are
    marked slow, as those marked in code are. The groups are then ordered by their measured seconds
    (test_seconds.txt), longest first, each group's tests together in their order: the workers take the groups
    in that order, so the short ones fill the end and neither worker is left running a long group alone."""
    listed = _listed_slow()
    measured = _measured_seconds()
    rootdir = Path(str(config.rootpath))
    seconds: dict[str, float] = {}
    groups = []
    for item in items:
        module = Path(str(item.path)).relative_to(rootdir).as_posix()
        node = f"{module}::{item.name}"
        if node in listed:
            item.add_marker(pytest.mark.slow)
        group = _example_shared(item)
        if group is None and item.get_closest_marker("xdist_group") is None:
            group = module
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        key = "_".join(names)  # xdist's scope: the sorted group names
        seconds[key] = seconds.get(key, 0.0) + measured.get(node, 0.0)
        groups.append(key)
    first = {}
    for i, key in enumerate(groups):
        first.setdefault(key, i)
    order = sorted(range(len(items)), key=lambda i: (-seconds[groups[i]], first[groups[i]], i))
    items[:] = [items[i] for i in order]


def _example_shared(item: pytest.Item) -> str | None:
    """The example model whose compiled forms the test shares (tests/support/compiled.py), if any."""
    callspec = getattr(item, "callspec", None)
    shares = "compiled" in getattr(item, "fixturenames", ()) or \
        getattr(getattr(item, "module", None), "GROUP_BY_EXAMPLE", False)
    if callspec is None or not shares:
        return None
    model = callspec.params.get("name") or callspec.params.get("example")
    return model if isinstance(model, str) else None
