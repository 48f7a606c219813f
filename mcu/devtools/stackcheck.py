"""Check the stack bound in QEMU: the firmware paints its free stack at reset and reports the high-water mark.

The measuring firmware is the model's normal firmware compiled with ``-DMCU_STACK_PAINT`` (see
ports/cortex-m/startup.c), with the same stack analysis and reservation (mcu/device/stack.py). It prints
``STACK <bytes>``: the deepest the stack reached while every bundled vector ran.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mcu.errors import McuError
from mcu.device.stack import StackReport
from mcu.device.console import parse_harness
from mcu.devtools.trace import build_variant

PAINT_DEFINE = "MCU_STACK_PAINT"
_STACK_LINE = re.compile(r"^STACK (\d+)\s*$", re.M)


@dataclass(frozen=True)
class StackCheck:
    high_water_bytes: int  # measured in QEMU
    report: StackReport  # the analysis of the same firmware
    ram_bytes: int  # the firmware's RAM: .data + .bss + arenas + the reserved stack
    passed: bool  # the firmware passed its bundled vectors


def measure_stack(cm: Any, timeout_s: float = 600.0) -> StackCheck:
    # lazy: keeps jinja2 out of this module's import
    from mcu.device.sim.qemu import run_qemu
    fw = build_variant(cm, "firmware-stack", {PAINT_DEFINE: None}, stack_usage=True)
    result = run_qemu(cm.board, fw.elf, timeout_s=timeout_s)
    m = _STACK_LINE.search(result.console)
    if m is None or fw.stack is None:
        raise McuError(f"the stack-measuring firmware of {cm.spec.name} printed no STACK line "
                       f"(exit status {result.exit_code})", hint=result.console.strip()[-1500:])
    report = parse_harness(result.console)
    return StackCheck(high_water_bytes=int(m.group(1)), report=fw.stack, ram_bytes=fw.ram_bytes,
                      passed=bool(report.passed) and result.exit_code == 0)
