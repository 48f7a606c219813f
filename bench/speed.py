"""Speed benchmark (not a test): instructions per inference of every reference model at int8 on the
simulated boards, next to CMSIS-NN's figures and the ratio; the fp32 figure and the int8
speed-up; per-layer instructions for one model; the kernels' code size for one model on M33.

Counts are exact guest instructions from QEMU's TCG plugin (ports/qemu/insn_count.c), the first
test vector, between mcu_bench_begin/end around the model's run (input/output copies included).
Beside them, the cycles the plugin's per-core timing model estimates over the same region and the
milliseconds at the board's clock (an estimate: docs/cycles.md).

    .venv/bin/python bench/speed.py [--boards mps2-an505,...] [--models small_cnn,...]
                                    [--layers ds_cnn] [--no-fp32] [--json out.json] [--cmsis-nn PATH]

With ``--cmsis-nn PATH`` (a CMSIS-NN source tree; default ``CMSIS_NN_PATH``) the CMSIS-NN column is
measured in the same run: the same quantized graph built with the backend order ``cmsis-nn,portable``
(CMSIS-NN wherever it serves, our portable kernels elsewhere), its outputs checked identical to ours.
Without it the column is the recorded figures below.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import copy  # noqa: E402
import os  # noqa: E402

from mcu.api import CompiledModel, backend_options, compile_file  # noqa: E402
from mcu.device.boards import load_board  # noqa: E402
from mcu.capture.loader import load_model_file  # noqa: E402
from mcu.pipeline import compile_graph, to_graph  # noqa: E402
from mcu.paths import cache_dir, kernel_source, runtime_dir  # noqa: E402

MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder"]
BOARDS = ["mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385"]

# CMSIS-NN 99f736a6, arm-none-eabi-gcc 12.2 -O2, QEMU 7.2 instruction counts.
CMSIS_NN = {
    "small_cnn": {"mps2-an505": 3_283_341, "mps2-an386": 3_280_007, "mps3-an547": 793_114, "mps2-an385": 4_200_515},
    "ds_cnn": {"mps2-an505": 7_679_506, "mps2-an386": 7_697_252, "mps3-an547": 1_813_045, "mps2-an385": 10_531_178},
    "mobilenet_v1": {"mps2-an505": 24_037_043, "mps2-an386": 24_092_349, "mps3-an547": 6_547_062,
                     "mps2-an385": 31_952_139},
    "resnet8": {"mps2-an505": 29_933_847, "mps2-an386": 29_847_756, "mps3-an547": 4_908_231,
                "mps2-an385": 41_844_265},
    "fc_autoencoder": {"mps2-an505": 579_549, "mps2-an386": 579_266, "mps3-an547": 146_650, "mps2-an385": 952_172},
}
# Targets: per model at most this ratio to CMSIS-NN, geometric mean at most 0.7 on M33/M4.
TARGET_RATIO = {"mps2-an505": 0.8, "mps2-an386": 0.8, "mps3-an547": 1.0}
KERNEL_TEXT_TARGET = 12 * 1024

TRACE_PRELUDE = """/* bench/speed.py: one instruction count per op (MCU_TRACE_OP closes the previous count). */
#include "mcu/platform.h"
#define MCU_TRACE_OP(index, name) do { mcu_bench_end(); mcu_bench_begin(); } while (0)
"""


def simulate(cm: CompiledModel):  # -> mcu.device.sim SimulationRun
    sim = cm.simulate()
    if not sim.passed:
        raise SystemExit(f"{cm.spec.name} on {cm.board.name} ({cm.quantize}) failed:\n{sim.console[-1500:]}")
    assert sim.instructions is not None
    return sim


def instructions(cm: CompiledModel) -> int:
    return simulate(cm).instructions


def compile_copy(spec, graph, board: str, backends: list[str] | None = None, cmsis_nn: Path | None = None):
    """A CompiledModel from a copy of an already quantized graph (quantization runs once per model)."""
    g = copy.deepcopy(graph)
    b = load_board(board)
    memory, library, report = compile_graph(g, b, "int8", backends, backend_options(cmsis_nn))
    return CompiledModel(spec=spec, board=b, quantize="int8", graph=g, memory=memory, library=library,
                         partitions=report)


def per_layer(cm: CompiledModel) -> list[tuple[str, str, int, int | None]]:
    """(op name, kernel, instructions, estimated cycles) per op, from a build whose MCU_TRACE_OP splits the
    count."""
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    files = dict(cm.firmware_sources())
    model_c = f"{cm.library.prefix}_model.c"
    files[model_c] = TRACE_PRELUDE + files[model_c]
    out_dir = cache_dir() / "bench_speed" / cm.board.name / (cm.library.prefix + ("-" + "-".join(sorted({bk for bk, _ in cm.partitions.partitions})) if cm.partitions else ""))
    src = out_dir / "src"
    src.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (src / name).write_text(text)
    rt = runtime_dir()
    sources = [src / n for n in files if n.endswith(".c")]
    sources += [kernel_source(s) for s in cm.library.kernel_sources]
    sources += [rt / s for s in cm.library.runtime_sources]
    includes = [src, rt / "include", *map(Path, cm.library.include_dirs)]  # CMSIS-NN's headers when it serves
    fw = build_firmware(cm.board, sources, includes, out_dir)
    result = run_qemu(cm.board, fw.elf)
    steps = cm.library.view.steps
    # counts: [input copy, op 0, op 1, ..., last op + output copy, then the same for the next vectors]
    per_op = result.instructions[1:len(steps) + 1]
    cycles = result.cycles[1:len(steps) + 1] or [None] * len(per_op)
    return [(s.name, s.call.function, n, c) for s, n, c in zip(steps, per_op, cycles)]


def kernel_text_bytes(cm: CompiledModel) -> tuple[int, dict[str, int]]:
    """.text bytes of the kernel objects linked into the firmware (input sections in the linker map)."""
    fw = cm.build()
    map_path = next(Path(fw.elf).parent.glob("*.map"))
    body = map_path.read_text(errors="replace").split("Linker script and memory map", 1)[-1]
    stems = {Path(k).stem for k in cm.library.kernel_sources}
    sizes: dict[str, int] = {}
    # ".text.fn 0xaddr 0xsize obj" on one line, or the name alone with the rest on the next line
    for m in re.finditer(r"^ \.text(?:\.\S*)?\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", body, re.M):
        stem = re.sub(r"^\d+-", "", Path(m.group(2)).name.split(".")[0])  # objects are "NNN-<source>.o"
        if stem in stems:
            sizes[stem] = sizes.get(stem, 0) + int(m.group(1), 16)
    return sum(sizes.values()), sizes


def print_cycles(report: dict, models: list[str], boards: list[str]) -> None:
    """The int8 table's estimated cycles: cycles, cycles per instruction, ms at the board's clock."""
    clocks = {b: load_board(b).clock_hz for b in boards}
    print("\nint8 estimated cycles per inference (cycles per instruction; ms at the board's clock), "
          "an estimate: docs/cycles.md")
    print(f"{'model':<16}" + "".join(f"{b + f' @{clocks[b] / 1e6:g} MHz':>34}" for b in boards))
    for m in models:
        row = f"{m:<16}"
        for b in boards:
            e = report["int8"][m][b]
            if e["cycles"] is None:
                row += f"{'-':>34}"
                continue
            row += f"{e['cycles']:>14,} ({e['cycles'] / e['instructions']:4.2f}; {e['ms']:8.2f} ms)"
        print(row)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--layers", default="ds_cnn", help="model for the per-layer table ('' for none)")
    parser.add_argument("--layers-board", default="mps2-an505")
    parser.add_argument("--no-fp32", action="store_true", help="skip the fp32 column")
    parser.add_argument("--json", type=Path, help="also write every figure as JSON")
    parser.add_argument("--cmsis-nn", type=Path, default=os.environ.get("CMSIS_NN_PATH") or None,
                        help="CMSIS-NN source tree: measure its column live (default: CMSIS_NN_PATH)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    boards = [b for b in args.boards.split(",") if b]
    models = [m for m in args.models.split(",") if m]
    report: dict = {"int8": {}, "fp32": {}, "layers": [], "kernel_text": {}}

    live = args.cmsis_nn is not None
    if live:
        from mcu.backends.cmsis_nn.core import resolve as resolve_cmsis

        cmsis_root = resolve_cmsis(args.cmsis_nn)
        print(f"int8 instructions per inference: ours / CMSIS-NN ({cmsis_root}, measured now; "
              "outputs identical to ours)")
    else:
        print("int8 instructions per inference (ratio to CMSIS-NN, recorded figures)")
    print(f"{'model':<16}" + "".join(f"{b:>26}" for b in boards))
    ratios: dict[str, list[float]] = {b: [] for b in boards}
    for m in models:
        row = f"{m:<16}"
        spec = load_model_file(ROOT / "examples" / f"{m}.py")
        graph = to_graph(spec, "int8")
        for b in boards:
            ours = simulate(compile_copy(spec, graph, b))
            n = ours.instructions
            entry: dict = {"instructions": n, "cycles": ours.estimated_cycles,
                           "ms": ours.estimated_cycles / load_board(b).clock_hz * 1e3
                           if ours.estimated_cycles else None}
            if live:
                theirs_cm = compile_copy(spec, graph, b, ["cmsis-nn", "portable"], cmsis_root)
                theirs = simulate(theirs_cm)
                ref = theirs.instructions
                same = all((x == y).all() for xs, ys in zip(ours.outputs_raw, theirs.outputs_raw)
                           for x, y in zip(xs, ys))
                if not same:
                    raise SystemExit(f"{m} on {b}: CMSIS-NN's outputs differ from ours")
                took = sum(len(ops) for bk, ops in theirs_cm.partitions.partitions if bk == "cmsis-nn")
                entry.update({"cmsis_nn_ops": took, "ops": len(theirs_cm.graph.ops),
                              "cmsis_nn_cycles": theirs.estimated_cycles})
            else:
                ref = CMSIS_NN[m][b]
            ratios[b].append(n / ref)
            entry.update({"cmsis_nn": ref, "ratio": n / ref})
            report["int8"].setdefault(m, {})[b] = entry
            row += f"{n:>14,} ({n / ref:5.2f}x)   "
        print(row, flush=True)
    if live:
        print("CMSIS-NN's instructions: " + "; ".join(
            f"{m} " + ", ".join(f"{report['int8'][m][b]['cmsis_nn']:,}" for b in boards) for m in models))
    geo = f"{'geomean ratio':<16}"
    for b in boards:
        g = math.exp(sum(map(math.log, ratios[b])) / len(ratios[b]))
        report.setdefault("geomean", {})[b] = g
        target = TARGET_RATIO.get(b)
        geo += f"{g:>21.2f}x" + (f" /{target:.1f}" if target else "     ")
    print(geo)
    print_cycles(report, models, boards)

    if not args.no_fp32:
        print("\nfp32 instructions per inference and int8 speed-up")
        print(f"{'model':<16}" + "".join(f"{b:>26}" for b in boards if b != "mps2-an385"))
        for m in models:
            row = f"{m:<16}"
            for b in boards:
                if b == "mps2-an385":
                    continue  # no FPU: soft-float fp32 is not a meaningful baseline
                n = instructions(compile_file(ROOT / "examples" / f"{m}.py", board=b, quantize="none"))
                i8 = report["int8"][m][b]["instructions"]
                report["fp32"].setdefault(m, {})[b] = {"instructions": n, "int8_speedup": n / i8}
                row += f"{n:>14,} ({n / i8:5.2f}x)   "
            print(row, flush=True)

    if args.layers:
        cm = compile_file(ROOT / "examples" / f"{args.layers}.py", board=args.layers_board, quantize="int8")
        print(f"\nper layer: {args.layers} int8 on {args.layers_board}")
        print(f"  {'op':<28} {'kernel':<34} {'instructions':>12} {'est. cycles':>12}")
        total = total_cycles = 0
        for name, fn, n, c in per_layer(cm):
            total += n
            total_cycles += c or 0
            report["layers"].append({"op": name, "kernel": fn, "instructions": n, "cycles": c})
            print(f"  {name:<28} {fn:<34} {n:>12,} {f'{c:,}' if c is not None else '-':>12}")
        print(f"  {'sum':<63} {total:>12,} {total_cycles:>12,}")

    cm = compile_file(ROOT / "examples" / "small_cnn.py", board="mps2-an505", quantize="int8")
    total, sizes = kernel_text_bytes(cm)
    report["kernel_text"] = {"model": "small_cnn", "board": "mps2-an505", "bytes": total, "by_file": sizes}
    print(f"\nkernel .text, small_cnn int8 on mps2-an505: {total} B (target <= {KERNEL_TEXT_TARGET} B)")
    for stem, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        print(f"  {stem:<36} {n:>6}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
