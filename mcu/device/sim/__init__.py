"""Running firmware on simulators (QEMU today)."""

from __future__ import annotations

from mcu.device.sim.qemu import SimResult, build_plugin, find_qemu, run_qemu

__all__ = ["SimResult", "build_plugin", "find_qemu", "run_qemu"]
