"""w8a16 GRUs against int8 on the simulated Cortex-M33 (mps2-an505): the whole-model cases of
tests/quantize/test_w8a16_gru.py (a two-layer GRU classifier and a GRUCell loop, tests/support/gru_models.py),
each as generated C: output SQNR against fp32 on its test inputs, instructions and estimated cycles of the first
inference, and the w8a16 / int8 instruction ratio.

    .venv/bin/python bench/w8a16_gru.py [gru|cell ...] [--board mps2-an505]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from gru_models import lowered  # noqa: E402
from int16_checks import device_sqnr_db  # noqa: E402


def measure(kind: str, quantize: str, board: str) -> tuple[float, int, int | None]:
    """(SQNR in dB against the fp32 model, instructions, estimated cycles) of ``kind`` at ``quantize``."""
    cm = lowered(kind, quantize).compile(board)
    sim = cm.simulate()
    if not sim.passed:
        raise SystemExit(f"{kind} {quantize}: the firmware did not pass:\n{sim.console[-2000:]}")
    return device_sqnr_db(cm, sim), int(sim.instructions or 0), sim.estimated_cycles


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", default=["gru", "cell"])
    parser.add_argument("--board", default="mps2-an505")
    args = parser.parse_args(argv)
    print("| model | SQNR w8a16 / int8 | instructions w8a16 / int8 | est. cycles w8a16 / int8 |")
    print("| --- | --- | --- | --- |")
    for kind in args.kinds:
        (s16, i16, c16), (s8, i8, c8) = (measure(kind, q, args.board) for q in ("w8a16", "int8"))
        print(f"| {kind} | {s16:.1f} / {s8:.1f} dB | {i16:,} / {i8:,} = {i16 / i8:.2f}x | {c16:,} / {c8:,} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
