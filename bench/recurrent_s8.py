"""Integer recurrent layers on the simulated Cortex-M33 (mps2-an505): the LSTM and GRU keyword
spotters in int8 before (each step unrolled, an fp32 island between a dequantize and a quantize) and after
(one mcu_lstm_s8 / mcu_gru_s8 call per layer), next to fp32: instructions of the first inference, flash,
arena, fp32 islands, and whether the int8 run equals the Python integer reference.

    .venv/bin/python bench/recurrent_s8.py [name ...]
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

from mcu.api import compile_file

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["kws_gru", "kws_lstm"]


def _measure(name: str, quantize: str, unrolled: bool) -> tuple[int, int, int, int, bool, bool]:
    """(instructions, flash, arena, fp32 islands, passed, exact reference)."""
    def keep(model, calibration):
        return model
    with mock.patch("mcu.capture.recurrent.rewrite_for_int8", keep) if unrolled else mock.patch.dict({}):
        cm = compile_file(ROOT / "examples" / f"{name}.py", board="mps2-an505", quantize=quantize)
    sim = cm.simulate()
    fw = cm.build()
    return sim.instructions, fw.flash_bytes, cm.memory.arena_size, len(cm.graph.fallbacks), sim.passed, \
        cm.reference_is_exact


def main(names: list[str]) -> int:
    print("| example | build | instructions | flash (B) | arena (B) | fp32 islands | passed | exact |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for label, q, unrolled in (("fp32", "none", False), ("int8 before (unrolled fp32 island)", "int8", True),
                                   ("int8 after (integer layers)", "int8", False)):
            instr, flash, arena, isl, passed, exact = _measure(name, q, unrolled)
            print(f"| {name} | {label} | {instr:,} | {flash:,} | {arena:,} | {isl} | {passed} | {exact} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or EXAMPLES))
