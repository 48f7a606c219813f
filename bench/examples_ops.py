"""The examples of the wider op set on the simulated Cortex-M33 (mps2-an505), fp32 and int8: instructions of the first
inference, flash, arena, the int8/fp32 instruction ratio, the ops left as fp32 islands in the int8
model, and whether each build fits pico2 (520 KiB RAM, 4 MiB flash).

    .venv/bin/python bench/examples_ops.py [name ...]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from mcu.api import compile_file
from mcu.errors import McuError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["kws_gru", "transformer_block", "unet_lite", "tcn", "conv_autoencoder", "mobilenet_v2",
            "kws_lstm"]  # integer recurrent layers


def islands(cm) -> str:
    """The int8 model's fp32 fallbacks as op kinds with counts (an unrolled GRU has hundreds)."""
    kinds = Counter(op.split(" ", 1)[0] for op, _ in cm.graph.fallbacks)
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kinds.items())) or "none"


def pico2_fit(name: str, quantize: str) -> str:
    try:
        fw = compile_file(ROOT / "examples" / f"{name}.py", board="pico2", quantize=quantize).build()
    except McuError as e:
        return f"no: {e}"
    return f"yes (flash {fw.flash_bytes} B, RAM {fw.ram_bytes} B)"


def main(names: list[str]) -> int:
    rows = []
    for name in names:
        fig = {}
        for q in ("none", "int8"):
            cm = compile_file(ROOT / "examples" / f"{name}.py", board="mps2-an505", quantize=q)
            sim = cm.simulate()
            fw = cm.build()
            fig[q] = (cm, sim, fw)
            print(f"{name} {q}: {'PASS' if sim.passed else 'FAIL'} instructions {sim.instructions} flash "
                  f"{fw.flash_bytes} arena {cm.memory.arena_size} exact reference {cm.reference_is_exact}",
                  flush=True)
        (cf, sf, ff), (ci, si, fi) = fig["none"], fig["int8"]
        rows.append((name, sf.instructions, si.instructions, si.instructions / sf.instructions, ff.flash_bytes,
                     fi.flash_bytes, cf.memory.arena_size, ci.memory.arena_size, islands(ci),
                     pico2_fit(name, "none"), pico2_fit(name, "int8")))
    print()
    print("| example | instr fp32 | instr int8 | int8/fp32 | flash fp32 | flash int8 | arena fp32 | arena int8 "
          "| fp32 islands in int8 | pico2 fp32 | pico2 int8 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:,} | {r[2]:,} | {r[3]:.2f} | {r[4]:,} | {r[5]:,} | {r[6]:,} | {r[7]:,} | {r[8]} "
              f"| {r[9]} | {r[10]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or EXAMPLES))
