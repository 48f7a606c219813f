"""Per-model figures on one simulated board (a benchmark, not a test): instructions per inference
(exact, QEMU plugin), flash and static RAM from the linker, arena against the live-set bound, for fp32
and int8, and the int8 speed-up.

    .venv/bin/python bench/models.py [--board mps2-an505] [--models small_cnn,ds_cnn]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import compile_file  # noqa: E402

MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder", "digits_cnn"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"board {args.board}")
    print(f"{'model':<15} {'mode':<5} {'instructions':>13} {'flash':>9} {'RAM':>8} {'arena':>8} {'bound':>8} "
          f"{'pass':>5}")
    for name in args.models.split(","):
        counts = {}
        for mode in ("none", "int8"):
            cm = compile_file(ROOT / "examples" / f"{name}.py", board=args.board, quantize=mode)
            fw = cm.build()
            sim = cm.simulate()
            counts[mode] = sim.instructions or 0
            print(f"{name:<15} {'fp32' if mode == 'none' else mode:<5} {sim.instructions:>13,} {fw.flash_bytes:>9,} "
                  f"{fw.ram_bytes:>8,} {cm.memory.arena_size:>8,} {cm.memory.lower_bound:>8,} "
                  f"{'yes' if sim.passed else 'NO':>5}", flush=True)
        if counts["int8"]:
            print(f"{'':<15} int8/fp32 instructions {counts['int8'] / counts['none']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
