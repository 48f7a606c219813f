"""Estimated cycles and milliseconds at a board's clock, next to the exact instruction count.

The QEMU plugin charges every executed instruction the cycles of the board's core from a timing model
(ports/qemu/cycle_model.c) plus its memories' wait states (``wait_states`` of the board file's
``[memory.*]`` tables). What it reports is an estimate: docs/cycles.md lists the sources, the
assumptions, and what the model leaves out. This module turns the plugin's cycle counts into the
figures every report prints, each marked as an estimate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcu.device.boards import Board, MemoryRegion, load_board
from mcu.errors import McuError

# What the reports say about the figure's accuracy until the model is calibrated against silicon.
ESTIMATE_NOTE = "estimate from the per-core timing model (docs/cycles.md); not calibrated against silicon"


@dataclass(frozen=True)
class CycleEstimate:
    """Estimated core cycles of one inference on ``core`` at ``clock_hz``."""

    cycles: int
    clock_hz: int
    core: str

    @property
    def ms(self) -> float:
        return self.cycles / self.clock_hz * 1e3

    def cpi(self, instructions: int | None) -> float | None:
        """Cycles per instruction, when the instruction count is known."""
        return self.cycles / instructions if instructions else None

    def fields(self) -> dict[str, Any]:
        """The keys a ``--json`` report gains: ``cycles``, ``ms`` and what they are."""
        return {"cycles": self.cycles, "ms": round(self.ms, 4),
                "timing": {"estimate": True, "core": self.core, "clock_hz": self.clock_hz, "note": ESTIMATE_NOTE}}

    def line(self, what: str = "inference") -> str:
        """One line for a text report."""
        return (f"estimated cycles per {what}: {self.cycles:,} ({self.ms:.3f} ms at {self.clock_hz / 1e6:g} MHz; "
                f"an estimate, see docs/cycles.md)")


def estimate(board: Board, cycles: list[int] | int | None) -> CycleEstimate | None:
    """The first inference's estimate from the plugin's per-region cycle counts; None when the board's
    core has no timing model (or nothing was measured)."""
    first = cycles[0] if isinstance(cycles, list) and cycles else cycles
    if not isinstance(first, int):
        return None
    return CycleEstimate(cycles=first, clock_hz=board.clock_hz, core=board.core)


def null_fields() -> dict[str, Any]:
    """The same keys when there is no estimate (a board whose core has no timing model, a Linux board)."""
    return {"cycles": None, "ms": None, "timing": None}


# The fields of a memory region that are its timing, not its place in the address map.
_TIMING_FIELDS = ("wait_states", "fetch_wait_states", "hit_rate", "fetch_hit_rate", "cache_bytes", "cache_ways",
                  "cache_line", "data_cache_bytes", "data_cache_ways", "data_cache_line", "l1_cached")


def _timed(place: MemoryRegion, timing: MemoryRegion) -> MemoryRegion:
    return dataclasses.replace(place, **{f: getattr(timing, f) for f in _TIMING_FIELDS})


def twin_board(board: Board, directory: Path | None = None) -> Board:
    """Where a board without a simulator gets its cycle prediction: its ``sim.twin`` (a QEMU board with
    the same core and compiler flags, so the model compiles to the same kernels) with ``board``'s clock and
    its flash's and RAM's timing on the twin's flash and RAM. Only the estimate is ``board``'s: the code
    runs at the twin's addresses, and the peripherals and start-up code are the twin's."""
    if board.sim_twin is None:
        raise McuError(f"board {board.name} names no simulated twin for a cycle prediction",
                       hint="add sim.twin = \"<QEMU board with the same core>\" to its board file")
    twin = load_board(board.sim_twin, directory)
    if twin.sim_kind != "qemu" or twin.core != board.core or twin.cpu_flags != board.cpu_flags:
        raise McuError(f"board {board.name}'s twin {twin.name} is not a QEMU board with the same core and "
                       f"compiler flags ({twin.core} {' '.join(twin.cpu_flags)})",
                       hint="name a QEMU board whose core and cpu_flags are the board's")
    return dataclasses.replace(twin, name=f"{twin.name}-as-{board.name}",
                               description=f"{twin.description}, timed as {board.name}", clock_hz=board.clock_hz,
                               flash=_timed(twin.flash, board.flash), ram=_timed(twin.ram, board.ram),
                               l1_cache=board.l1_cache)
