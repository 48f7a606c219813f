"""Estimated cycles and milliseconds at a board's clock, next to the exact instruction count.

The QEMU plugin charges every executed instruction the cycles of the board's core from a timing model
(ports/qemu/cycle_model.c) plus its memories' wait states (``wait_states`` of the board file's
``[memory.*]`` tables). What it reports is an estimate: docs/cycles.md lists the sources, the
assumptions, and what the model leaves out. This module turns the plugin's cycle counts into the
figures every report prints, each marked as an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcu.device.boards import Board

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
