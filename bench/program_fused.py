"""Fused blocks through the program file (not a test): per model, whole tensors against fused blocks
(``--fuse-blocks auto``, the smallest arena), each run as the generated C firmware and as a program file in
the interpreter firmware, in QEMU with the bundled vectors. Prints the arena, the instructions per inference
of both, the program file's bytes and its instruction count (a fused block is one LOOP and its body).

Program files run the interpreter's kernel table (the portable backend's kernels, their DSP paths included on a
DSP core); the generated C runs the board's default backends, so the C column is what a user gets from
`mcu build`, not the same kernels. Exits 1 when a run fails its vectors.

    .venv/bin/python bench/program_fused.py [--board mps2-an505] [--models mobilenet_v2,resnet8] [--quantize int8]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import compile_file  # noqa: E402
from mcu.program.run_model import run_program_model  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--models", default="mobilenet_v2,resnet8")
    parser.add_argument("--quantize", default="int8")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    ok = True
    print(f"{'model':<14} {'schedule':<8} {'arena (B)':>10} {'C instructions':>15} {'program instr.':>15} "
          f"{'program (B)':>12} {'instructions':>12}")
    for model in args.models.split(","):
        for schedule in ("whole", "fused"):
            cm = compile_file(ROOT / "examples" / f"{model}.py", board=args.board, quantize=args.quantize,
                              fuse_blocks="auto" if schedule == "fused" else False)
            sim = cm.simulate()
            run = run_program_model(cm)
            image = cm.program_image(bundle_tests=True)
            passed = sim.passed and run.run.exit_code == 0
            ok &= passed
            print(f"{model:<14} {schedule:<8} {cm.memory.arena_size:>10,} {sim.instructions or 0:>15,} "
                  f"{run.instructions or 0:>15,} {len(image.program):>12,} {len(image.instructions['forward']):>12}"
                  + ("" if passed else "  FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
