"""Check the stack bound in QEMU: the firmware paints its free stack at reset and reports the high-water mark.

The measuring firmware is the model's normal firmware compiled with ``-DMCU_STACK_PAINT`` (see
ports/cortex-m/startup.c), with the same stack analysis and reservation (mcu/stack.py). It prints
``STACK <bytes>``: the deepest the stack reached while every bundled vector ran.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcu.errors import McuError
from mcu.paths import cache_dir, runtime_dir
from mcu.stack import StackReport

PAINT_DEFINE = "MCU_STACK_PAINT"
_STACK_LINE = re.compile(r"^STACK (\d+)\s*$", re.M)


@dataclass(frozen=True)
class StackCheck:
    high_water_bytes: int  # measured in QEMU
    report: StackReport  # the analysis of the same firmware
    ram_bytes: int  # the firmware's RAM: .data + .bss + arenas + the reserved stack
    passed: bool  # the firmware passed its bundled vectors


def measure_stack(cm: Any, timeout_s: float = 600.0) -> StackCheck:
    from mcu.console import parse_harness
    from mcu.sim.qemu import run_qemu
    from mcu.toolchain import build_firmware

    files = cm.firmware_sources()
    digest = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode()).hexdigest()
    out_dir = cache_dir() / "firmware-stack" / cm.board.name / f"{cm.library.prefix}-{digest[:20]}"
    src_dir = out_dir / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = src_dir / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    rt = runtime_dir()
    sources = [src_dir / n for n in files if n.endswith(".c")]
    sources += [rt / "kernels" / s for s in cm.library.kernel_sources]
    sources += [rt / s for s in cm.library.runtime_sources]
    includes = [src_dir, rt / "include", *map(Path, cm.library.include_dirs)]
    fw = build_firmware(cm.board, sources, includes, out_dir, defines={PAINT_DEFINE: None}, stack_usage=True)
    result = run_qemu(cm.board, fw.elf, timeout_s=timeout_s)
    m = _STACK_LINE.search(result.console)
    if m is None or fw.stack is None:
        raise McuError(f"the stack-measuring firmware of {cm.spec.name} printed no STACK line "
                       f"(exit status {result.exit_code})", hint=result.console.strip()[-1500:])
    report = parse_harness(result.console)
    return StackCheck(high_water_bytes=int(m.group(1)), report=fw.stack, ram_bytes=fw.ram_bytes,
                      passed=bool(report.passed) and result.exit_code == 0)
