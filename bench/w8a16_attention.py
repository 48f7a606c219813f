"""w8a16 attention and normalisation against int8 on the simulated Cortex-M33 (mps2-an505): the models of
tests/quantize/test_w8a16_attention.py (tests/support/attention_models.py: nn.MultiheadAttention with and without
the weights, a hand-built encoder layer with a log-softmax head, nn.RMSNorm, masked attention), or with
``--family cells`` the recurrent cell loops of tests/quantize/test_w8a16_cells.py (tests/support/cell_models.py),
each as generated C: output SQNR against fp32 on its test inputs, instructions of the first inference and the
w8a16 / int8 instruction ratio.

    .venv/bin/python bench/w8a16_attention.py [mha|mha_weights|encoder|rms|causal|masked ...] [--board mps2-an505]
    .venv/bin/python bench/w8a16_attention.py --family cells [lstm_cell|rnn_cell]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from int16_checks import device_sqnr_db  # noqa: E402

FAMILIES = {"attention": "attention_models", "cells": "cell_models"}


def measure(family: str, name: str, quantize: str, board: str) -> tuple[float, int]:
    """(SQNR in dB against the fp32 model, instructions) of ``name`` at ``quantize``."""
    cm = importlib.import_module(FAMILIES[family]).compile_model(name, quantize, board)
    sim = cm.simulate()
    if not sim.passed:
        raise SystemExit(f"{name} {quantize}: the firmware did not pass:\n{sim.console[-2000:]}")
    return device_sqnr_db(cm, sim), int(sim.instructions or 0)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--family", choices=sorted(FAMILIES), default="attention")
    args = parser.parse_args(argv)
    names = args.names or importlib.import_module(FAMILIES[args.family]).MODELS
    print("| model | SQNR w8a16 / int8 | instructions w8a16 / int8 |")
    print("| --- | --- | --- |")
    for name in names:
        (s16, i16), (s8, i8) = (measure(args.family, name, q, args.board) for q in ("w8a16", "int8"))
        print(f"| {name} | {s16:.1f} / {s8:.1f} dB | {i16:,} / {i8:,} = {i16 / i8:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
