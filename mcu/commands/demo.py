"""``make demo``: the int8 program next to fp32 on a simulated board, in one small table.

    python -m mcu.commands.demo [--board mps2-an505] [--model examples/small_cnn.py]

Both variants are compiled, built and run in the board's simulator with the bundled test vectors;
the table shows instructions per inference (exact, counted by the QEMU plugin), the cycles and
milliseconds the plugin's timing model estimates at the board's clock (docs/cycles.md), flash, static
RAM, the arena, and how far the device is from what it must output: the int8 program is checked bit for
bit against the Python integer reference, fp32 against eager PyTorch within a tolerance.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mcu.device.timing import estimate
from mcu.errors import McuError
from mcu.progress import Reporter, quiet_torch, reporting, terminal_stream
from mcu.quantize import modes

ROOT = Path(__file__).resolve().parents[2]


def _differences(cm: Any, sim: Any) -> int:
    """Output elements where the device differs from the expected outputs (exact comparison)."""
    count = 0
    for got, want in zip(sim.outputs_raw, cm.expected_outputs):
        for g, w in zip(got, cm.raw_outputs(want)):
            count += int(np.count_nonzero(np.asarray(g).reshape(-1) != np.asarray(w).reshape(-1)))
    return count


def measure(model: Path, board: str, quantize: str) -> dict[str, Any]:
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import compile_file

    with quiet_torch(verbose=False):
        cm = compile_file(model, board=board, quantize=quantize)
    fw = cm.build()
    sim = cm.simulate()
    timing = estimate(cm.board, sim.estimated_cycles)
    return {"quantize": cm.quantize, "passed": sim.passed, "vectors": len(sim.outputs),
            "instructions": sim.instructions, "cycles": timing.cycles if timing else None,
            "ms": timing.ms if timing else None, "clock_hz": cm.board.clock_hz, "flash": fw.flash_bytes,
            "ram": fw.ram_bytes,
            "arena": cm.memory.arena_size, "exact": cm.reference_is_exact,
            "differences": _differences(cm, sim), "max_abs_vs_eager": sim.max_abs_error_vs_eager,
            "core": cm.board.core}


def table(name: str, board: str, cols: Sequence[dict[str, Any]]) -> str:
    def row(label: str, values: Sequence[str]) -> str:
        return f"{label:<34}" + "".join(f"{v:>16}" for v in values)

    checks = []
    for c in cols:
        checks.append(f"{c['differences']} (bit-exact)" if c["exact"] else f"{c['max_abs_vs_eager']:.1e} max")
    lines = [f"{name} on {board} ({cols[0]['core']}, simulated)",
             row("", ["fp32" if modes.is_float(c["quantize"]) else c["quantize"] for c in cols]),
             row("instructions per inference", [f"{c['instructions']:,}" for c in cols]),
             row("flash (B)", [f"{c['flash']:,}" for c in cols]),
             row("static RAM (B)", [f"{c['ram']:,}" for c in cols]),
             row("arena (B)", [f"{c['arena']:,}" for c in cols]),
             row("cycles per inference (estimate)", [f"{c['cycles']:,}" if c["cycles"] else "-" for c in cols]),
             row(f"ms at {cols[0]['clock_hz'] / 1e6:g} MHz (estimate)",
                 [f"{c['ms']:.3f}" if c["ms"] else "-" for c in cols]),
             row("bundled test vectors", [f"{c['vectors']} {'PASS' if c['passed'] else 'FAIL'}" for c in cols]),
             row("differences from the reference", checks)]
    lines.append("(int8: device vs the Python integer reference, element by element; "
                 "fp32: |device - eager PyTorch|)")
    lines.append("(cycles: the simulator's per-core timing model, an estimate not yet calibrated against silicon; "
                 "docs/cycles.md)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcu.commands.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "small_cnn.py")
    args = parser.parse_args(argv)
    try:
        with reporting(Reporter(stream=terminal_stream(sys.stderr))) as rep:
            cols = []
            for quantize in (modes.NONE, modes.INT8):
                rep.done.clear()  # each variant goes through every stage again
                cols.append(measure(args.model, args.board, quantize))
    except McuError as exc:
        print(f"mcu: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(table(args.model.stem, args.board, cols))
    return 0 if all(c["passed"] for c in cols) and all(c["differences"] == 0 for c in cols if c["exact"]) else 1


if __name__ == "__main__":
    sys.exit(main())
