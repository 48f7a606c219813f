"""Cycle tables (a benchmark, not a test): per simulated core, the five reference models at int8, ours
and CMSIS-NN's, with instructions (exact), estimated cycles, cycles per instruction and ms at the
board's clock; the MLPerf Tiny best published results beside them and the goal line; then the
calibration table: each published anchor that ran CMSIS-NN on a core we simulate, our prediction for
what it ran, and predicted / published.

    .venv/bin/python bench/cycles.py --cmsis-nn PATH [--boards ...] [--models ...] [--results DIR]
                                     [--no-run] [--markdown] [--mv2-head] [--weights-in fast]
                                     [--cmsis-nn-from DIR] [--splice docs/cycles.md]

Every (model, board) measurement is written to ``--results`` (default ``<cache>/bench_cycles``) as one
JSON file and reused by later runs (delete the folder to measure again), so several processes may
measure disjoint model lists into the same folder and a last ``--no-run`` prints the whole table.
``--cmsis-nn-from DIR`` takes CMSIS-NN's column from an earlier results folder measured with the same tree
and placement, and measures ours only: our outputs must equal the digest of CMSIS-NN's stored there (after a
change to our kernels, CMSIS-NN's figures do not move unless our portable kernels serve its other ops).
The cycles are the plugin's estimate (ports/qemu/cycle_model.c, docs/cycles.md); nothing here is tuned
to any anchor: one per-core table serves every model.

``--mv2-head`` also measures bench/mobilenet_v2_head.py (the first blocks of torchvision's MobileNetV2
at 224x224) per op on the Cortex-M55 with CMSIS-NN, against the per-op cycles published for an Alif E8
(pytorch/executorch issue #17651).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import io
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import CompiledModel, backend_options  # noqa: E402
from mcu.capture.loader import load_model_file  # noqa: E402
from mcu.device.boards import Board, MemoryRegion, load_board  # noqa: E402
from mcu.paths import cache_dir  # noqa: E402
from mcu.pipeline import compile_graph, to_graph  # noqa: E402

MODELS = ["ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder", "small_cnn"]
BOARDS = ["mps2-an385-m0plus", "mps2-an385", "mps2-an386", "mps2-an386-l4r5", "mps2-an505", "mps2-an505-u575",
          "mps3-an547"]
BENCHMARK = {"ds_cnn": "KWS", "mobilenet_v1": "VWW", "resnet8": "IC", "fc_autoencoder": "AD"}
MLPERF = "github.com/mlcommons/tiny_results_v"


@dataclass(frozen=True)
class Published:
    """One MLPerf Tiny closed-division latency result: the median throughput of the performance run
    (``results/<system>/<benchmark>/performance/results.txt`` of the round's repository) at the
    system's clock; cycles = clock / throughput."""

    benchmark: str
    core: str
    system: str
    clock_hz: int
    throughput: float  # inferences per second, the log's median
    round: str
    submitter: str
    software: str
    path: str  # in the round's repository

    @property
    def cycles(self) -> float:
        return self.clock_hz / self.throughput

    @property
    def source(self) -> str:
        return f"{MLPERF}{self.round} {self.path}"


def _mlperf(benchmark: str, core: str, system: str, mhz: int, throughput: float, rnd: str, submitter: str,
            software: str, path: str) -> Published:
    return Published(benchmark, core, system, mhz * 1_000_000, throughput, rnd, submitter, software, path)


# The best published result per benchmark on each simulated core that has one (Cortex-M0+, M4, M33; no
# Cortex-M3 or M55 system was submitted) and on the Cortex-M85 the M55's goal names. Re-read from the
# repositories: the figures are the performance logs' median throughputs.
BEST = [
    _mlperf("KWS", "cortex-m33", "NUCLEO-U575ZI-Q", 160, 34.485, "1.3", "STMicroelectronics", "X-CUBE-AI 10.2",
            "closed/STMicroelectronics/results/NUCLEO_U575ZI_Q/kws/performance/results.txt (window 1)"),
    _mlperf("VWW", "cortex-m33", "NUCLEO-U575ZI-Q", 160, 16.8735, "1.3", "STMicroelectronics", "X-CUBE-AI 10.2",
            "closed/STMicroelectronics/results/NUCLEO_U575ZI_Q/vww/performance/results.txt (window 1)"),
    _mlperf("IC", "cortex-m33", "NUCLEO-U575ZI-Q", 160, 9.589, "1.1", "Plumerai", "Plumerai Inference Engine",
            "closed/plumerai/results/NUCLEO-U575ZI-Q/ic/performance/results.txt"),
    _mlperf("AD", "cortex-m33", "NUCLEO-U575ZI", 160, 323.527, "1.2", "Bosch", "HALE 1.0.175 (max performance)",
            "closed/bosch/results/NUCLEO_U575ZI_int8_max_performance/ad/performance/results.txt"),
    _mlperf("KWS", "cortex-m4", "NUCLEO-L4R5ZI", 120, 23.155, "1.2", "STMicroelectronics", "X-CUBE-AI 9.0",
            "closed/STMicroelectronics/results/NUCLEO_L4R5ZI/kws/performance/results.txt"),
    _mlperf("VWW", "cortex-m4", "NUCLEO-L4R5ZI", 120, 11.245, "1.2", "STMicroelectronics", "X-CUBE-AI 9.0",
            "closed/STMicroelectronics/results/NUCLEO_L4R5ZI/vww/performance/results.txt"),
    _mlperf("IC", "cortex-m4", "NUCLEO-L4R5ZI", 120, 6.056, "1.2", "STMicroelectronics", "X-CUBE-AI 9.0",
            "closed/STMicroelectronics/results/NUCLEO_L4R5ZI/ic/performance/results.txt"),
    _mlperf("AD", "cortex-m4", "NUCLEO-L4R5ZI", 120, 246.814, "1.1", "Plumerai", "Plumerai Inference Engine",
            "closed/plumerai/results/NUCLEO-L4R5ZI/ad/performance/results.txt"),
    *[_mlperf(b, "cortex-m0plus", "NUCLEO-G0B1RE", 64, t, "1.2", "Bosch", "HALE 1.0.175",
              f"closed/bosch/results/NUCLEO_G0B1RE_int8/{b.lower()}/performance/results.txt")
      for b, t in [("KWS", 2.107), ("VWW", 0.707), ("IC", 0.657), ("AD", 24.454)]],
    _mlperf("KWS", "cortex-m85", "EK-RA8D1", 480, 288.611, "1.2", "Renesas", "TFLite Micro + CMSIS-NN",
            "closed/Renesas/results/EK-RA8D1/kws/performance/results.txt"),
    _mlperf("VWW", "cortex-m85", "EK-RA8D1", 480, 74.665, "1.2", "Renesas", "TFLite Micro + CMSIS-NN",
            "closed/Renesas/results/EK-RA8D1/vww/performance/results.txt"),
    _mlperf("IC", "cortex-m85", "EK-RA8D1", 480, 117.948, "1.2", "Renesas", "TFLite Micro + CMSIS-NN",
            "closed/Renesas/results/EK-RA8D1/ic/performance/results.txt"),
    _mlperf("AD", "cortex-m85", "EK-RA8D1", 480, 1884.138, "1.2", "Renesas", "TFLite Micro + CMSIS-NN",
            "closed/Renesas/results/EK-RA8D1/ad/performance/results.txt"),
]

# Published results whose software ran CMSIS-NN's kernels on a core we simulate: what the calibration
# table predicts with the CMSIS-NN column. (Every other Cortex-M33/M4 result ran a closed engine,
# X-CUBE-AI, Plumerai's or Bosch's HALE, which the simulator cannot run.)
CMSIS_ANCHORS = [
    *[_mlperf(b, "cortex-m33", "EK-RA6M4 (RA6M4)", 200, t, "0.7", "Renesas",
              "TFLite Micro + CMSIS-NN 6.5.3 (Jan 2021), GCC 8.3",
              f"closed/renesas/results/EK-RA6M4/{b.lower()}/performance/results.txt")
      for b, t in [("KWS", 19.774), ("VWW", 6.159), ("IC", 4.062), ("AD", 216.772)]],
    *[_mlperf(b, "cortex-m33", "nRF5340-DK (nRF5340 app core)", 128, t, "1.1", "Krai",
              "microTVM + CMSIS-NN (TVM e3a6cb6)",
              f"closed/Krai/results/NRF5340-DK_MICROTVM-CMSIS-NN/{b.lower()}/performance/results.txt")
      for b, t in [("KWS", 13.074), ("VWW", 4.286), ("IC", 3.146), ("AD", 159.020)]],
    *[_mlperf(b, "cortex-m4", "NUCLEO-L4R5ZI (STM32L4R5)", 120, t, "1.1", "Krai", "microTVM + CMSIS-NN (TVM e3a6cb6)",
              f"closed/Krai/results/NUCLEO-L4R5ZI_MICROTVM-CMSIS-NN/{b.lower()}/performance/results.txt")
      for b, t in [("KWS", 10.019), ("VWW", 3.324), ("IC", 2.567), ("AD", 116.212)]],
    *[_mlperf(b, "cortex-m4", "Nucleo-L4R5ZI (STM32L4R5)", 120, t, "0.5", "reference",
              "TFLite Micro v2.3.1 + its CMSIS-NN (2020), GCC 6",
              f"closed/reference/results/Nucleo-L4R5ZI/{b.lower()}/performance/results.txt")
      for b, t in [("KWS", 5.497), ("VWW", 1.665), ("IC", 1.420), ("AD", 99.487)]],
]

# The boards whose prediction each calibration core is read from (the zero-wait-state FPGA memory, and
# the flash timing of a chip the anchors ran on: the STM32U575 for the M33, the STM32L4R5 for the M4).
CALIBRATION_BOARDS = {"cortex-m33": ["mps2-an505", "mps2-an505-u575"], "cortex-m4": ["mps2-an386", "mps2-an386-l4r5"]}

# The goal per board: cycles below these published figures.
GOAL = {"mps2-an505-u575": "cortex-m33", "mps3-an547": "cortex-m85"}

# pytorch/executorch issue #17651 (comment of 2026-03-03): torchvision's MobileNetV2 int8 through
# ExecuTorch's Cortex-M backend on CMSIS-NN v7.0.0, Alif E8 HP Cortex-M55, arenas in SRAM, the model in
# MRAM; cycles of each op (rows 3 to 10 of the published table, the first eight layers).
MV2_ALIF_E8 = [
    ("conv 3->32 3x3 s2", 13_754_047),
    ("depthwise 32 3x3", 13_715_766),
    ("conv 32->16 1x1", 4_915_937),
    ("conv 16->96 1x1", 24_249_462),
    ("depthwise 96 3x3 s2", 10_286_711),
    ("conv 96->24 1x1", 2_791_555),
    ("conv 24->144 1x1", 10_329_014),
    ("depthwise 144 3x3", 15_319_785),
]
MV2_SOURCE = "github.com/pytorch/executorch/issues/17651 (Alif E8 HP Cortex-M55, CMSIS-NN v7.0.0)"


def compile_copy(spec, graph, board: str | Board, backends: list[str] | None = None,
                 cmsis_nn: Path | None = None, weights_in: str | None = None) -> CompiledModel:
    """A CompiledModel from a copy of an already quantized graph (quantization runs once per model);
    ``weights_in``: ``--weights-in`` (None: the board's default)."""
    g = copy.deepcopy(graph)
    b = load_board(board) if isinstance(board, str) else board
    memory, library, report = compile_graph(g, b, "int8", backends, backend_options(cmsis_nn), weights_in=weights_in)
    return CompiledModel(spec=spec, board=b, quantize="int8", graph=g, memory=memory, library=library,
                         partitions=report, weights_in=weights_in)


def zero_wait(board: Board) -> Board:
    """The board with every memory answering at once: what the core's table alone predicts (a what-if
    that separates the memory assumptions from the core's costs; the firmware is the same)."""
    def fast(r: MemoryRegion) -> MemoryRegion:
        return dataclasses.replace(r, wait_states=0.0, fetch_wait_states=None, cache_bytes=0, data_cache_bytes=0)

    return dataclasses.replace(board, flash=fast(board.flash), ram=fast(board.ram),
                               extra_regions=tuple(fast(r) for r in board.extra_regions))


def run(cm: CompiledModel):  # -> mcu.api SimulationRun
    sim = cm.simulate()
    if not sim.passed or sim.instructions is None:
        raise SystemExit(f"{cm.spec.name} on {cm.board.name} failed:\n{sim.console[-1500:]}")
    return sim


def figures(instructions: int, cycles: int | None, clock_hz: int) -> dict:
    return {"instructions": instructions, "cycles": cycles,
            "cpi": cycles / instructions if cycles else None,
            "ms": cycles / clock_hz * 1e3 if cycles else None}


def measure(model: str, boards: list[str], cmsis_root: Path, results: Path, weights_in: str | None = None,
            cmsis_from: Path | None = None) -> None:
    """Ours and CMSIS-NN's figures for one model on each board not measured yet (CMSIS-NN's from
    ``cmsis_from`` when given)."""
    todo = [b for b in boards if not (results / f"{model}.{b}.json").exists()]
    if not todo:
        return
    spec = load_model_file(ROOT / "examples" / f"{model}.py")
    graph = to_graph(spec, "int8")
    for b in todo:
        try:
            earlier = load(cmsis_from, model, b) if cmsis_from is not None else None
            if cmsis_from is not None and (earlier is None or "outputs_sha256" not in earlier):
                raise SystemExit(f"{cmsis_from} has no CMSIS-NN figures with an output digest for it")
            entry = measure_one(spec, graph, b, cmsis_root, weights_in, earlier)
        except (SystemExit, Exception) as e:  # one failing pair leaves a gap in the table, not an empty table
            print(f"FAILED {model} on {b}: {e}", file=sys.stderr, flush=True)
            continue
        (results / f"{model}.{b}.json").write_text(json.dumps({"model": model, "board": b, **entry}, indent=1))
        o, c = entry["ours"], entry["cmsis_nn"]
        print(f"measured {model} on {b}: ours {o['instructions']:,} instructions, {o['cycles']:,} cycles; "
              f"CMSIS-NN {c['instructions']:,}, {c['cycles']:,}", file=sys.stderr, flush=True)


def outputs_digest(outputs_raw) -> str:
    """One SHA-256 over every output of every test vector, in order (raw integer bytes)."""
    h = hashlib.sha256()
    for xs in outputs_raw:
        for x in xs:
            h.update(x.tobytes())
    return h.hexdigest()


def measure_one(spec, graph, b: str, cmsis_root: Path, weights_in: str | None = None,
                earlier: dict | None = None) -> dict:
    """``earlier``: an earlier result for this model and board whose CMSIS-NN column is reused."""
    clock = load_board(b).clock_hz
    ours = run(compile_copy(spec, graph, b, weights_in=weights_in))
    digest = outputs_digest(ours.outputs_raw)
    if earlier is not None:
        if digest != earlier["outputs_sha256"]:
            raise SystemExit("our outputs differ from the CMSIS-NN outputs stored in the earlier results")
        cmsis = earlier["cmsis_nn"]
    else:
        theirs_cm = compile_copy(spec, graph, b, ["cmsis-nn", "portable"], cmsis_root, weights_in)
        theirs = run(theirs_cm)
        if digest != outputs_digest(theirs.outputs_raw):
            raise SystemExit("CMSIS-NN's outputs differ from ours")
        took = sum(len(ops) for bk, ops in theirs_cm.partitions.partitions if bk == "cmsis-nn")
        cmsis = {**figures(theirs.instructions, theirs.estimated_cycles, clock),
                 "ops_on_cmsis_nn": took, "ops": len(theirs_cm.graph.ops)}
    return {"clock_hz": clock, "ours": figures(ours.instructions, ours.estimated_cycles, clock),
            "cmsis_nn": cmsis, "outputs_sha256": digest}


def load(results: Path, model: str, board: str) -> dict | None:
    path = results / f"{model}.{board}.json"
    return json.loads(path.read_text()) if path.exists() else None


def best(benchmark: str, core: str) -> Published | None:
    return next((p for p in BEST if p.benchmark == benchmark and p.core == core), None)


class Table:
    """Rows printed as aligned text, or as a Markdown table (docs/cycles.md)."""

    def __init__(self, header: list[str], markdown: bool) -> None:
        self.rows = [header]
        self.markdown = markdown

    def add(self, row: list[str]) -> None:
        self.rows.append(row)

    def print(self) -> None:
        if self.markdown:
            print("| " + " | ".join(self.rows[0]) + " |")
            print("| " + " | ".join(["---"] + ["---:"] * (len(self.rows[0]) - 1)) + " |")
            for r in self.rows[1:]:
                print("| " + " | ".join(r) + " |")
        else:
            widths = [max(len(r[i]) for r in self.rows) for i in range(len(self.rows[0]))]
            for r in self.rows:
                print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        print()


def m(cycles: float | None) -> str:
    return "-" if cycles is None else f"{cycles / 1e6:.3f} M"


def placement(weights_in: str | None) -> str:
    """How the goal lines and headings name where the weights were: the default is each board's own
    (flash on every board), so only an explicit ``fast`` reads differently."""
    return "--weights-in fast" if weights_in == "fast" else "weights in flash (default)"


def per_core_tables(results: Path, models: list[str], boards: list[str], markdown: bool,
                    weights_in: str | None = None) -> None:
    for b in boards:
        board = load_board(b)
        print(f"{'### ' if markdown else ''}{b}: {board.core}, {board.clock_hz / 1e6:g} MHz, {placement(weights_in)} "
              f"(cycles and ms: estimates, docs/cycles.md)\n")
        core_best = any(p.core == board.core for p in BEST)
        header = ["model", "ours instructions", "ours cycles", "CPI", "ms", "CMSIS-NN instructions",
                  "CMSIS-NN cycles", "CPI", "ms", "ops on CMSIS-NN", "ours / CMSIS-NN cycles"]
        if core_best:
            header += ["MLPerf Tiny best (cycles)", "ours / best"]
        t = Table(header, markdown)
        ratios = []
        for model in models:
            e = load(results, model, b)
            name = f"{model} ({BENCHMARK[model]})" if model in BENCHMARK else model
            if e is None:
                t.add([name] + ["-"] * (len(header) - 1))
                continue
            o, c = e["ours"], e["cmsis_nn"]
            row = [name]
            for f in (o, c):
                row += [f"{f['instructions']:,}", f"{f['cycles']:,}" if f["cycles"] else "-",
                        f"{f['cpi']:.2f}" if f["cpi"] else "-", f"{f['ms']:.2f}" if f["ms"] else "-"]
            if o["cycles"] and c["cycles"]:
                ratios.append(o["cycles"] / c["cycles"])
            row += [f"{c['ops_on_cmsis_nn']}/{c['ops']}", f"{ratios[-1]:.2f}" if o["cycles"] and c["cycles"] else "-"]
            if core_best:
                p = best(BENCHMARK.get(model, ""), board.core)
                row += [f"{p.cycles:,.0f} ({p.submitter}, v{p.round})" if p else "-",
                        f"{o['cycles'] / p.cycles:.2f}" if p and o["cycles"] else "-"]
            t.add(row)
        if ratios:
            geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            t.add(["geometric mean"] + [""] * 9 + [f"{geomean:.2f}"] + [""] * (len(header) - 11))
        t.print()
        goal_line(results, models, b, markdown, weights_in)


def goal_line(results: Path, models: list[str], b: str, markdown: bool, weights_in: str | None = None) -> None:
    core = GOAL.get(b)
    if core is None:
        return
    parts = []
    met = True
    for model in [x for x in models if x in BENCHMARK]:
        p = best(BENCHMARK[model], core)
        e = load(results, model, b)
        if p is None or e is None or not e["ours"]["cycles"]:
            met = False
            parts.append(f"{BENCHMARK[model]} not measured")
            continue
        ours = e["ours"]["cycles"]
        ok = ours < p.cycles
        met &= ok
        parts.append(f"{BENCHMARK[model]} {ours / 1e6:.2f} M {'<' if ok else '>='} {p.cycles / 1e6:.3f} M")
    what = "the Cortex-M85 (EK-RA8D1, TFLite Micro + CMSIS-NN)" if core == "cortex-m85" else "the Cortex-M33 best"
    print(f"{'**Goal**' if markdown else 'goal'} ({b}, {placement(weights_in)}: estimated cycles below {what} "
          "for all four benchmarks): "
          f"{'MET' if met else 'NOT MET'}: " + "; ".join(parts) + "\n")


def calibration_table(results: Path, markdown: bool) -> None:
    print(f"{'### ' if markdown else ''}Calibration: published results that ran CMSIS-NN on a simulated core, "
          "and the CMSIS-NN column's prediction\n")
    header = ["anchor (system, clock, software, round)", "benchmark", "published cycles",
              "predicted: FPGA board, 0 wait states", "predicted / published",
              "predicted: the chip's flash (mps2-an505-u575, mps2-an386-l4r5)", "predicted / published"]
    t = Table(header, markdown)
    model_of = {v: k for k, v in BENCHMARK.items()}
    for p in CMSIS_ANCHORS:
        row = [f"{p.system}, {p.core}, {p.clock_hz / 1e6:g} MHz, {p.software}, v{p.round}", p.benchmark,
               f"{p.cycles:,.0f}"]
        boards = CALIBRATION_BOARDS[p.core]
        for b in [boards[0], boards[1] if len(boards) > 1 else None]:
            e = load(results, model_of[p.benchmark], b) if b else None
            pred = e["cmsis_nn"]["cycles"] if e else None
            row += [f"{pred:,} ({b})" if pred else "-", f"{pred / p.cycles:.2f}" if pred else "-"]
        t.add(row)
    t.print()
    print("Sources: " + "; ".join(sorted({f"{MLPERF}{p.round} closed/{p.path.split('/')[1]}/results/"
                                           f"{p.path.split('/')[3]}/<benchmark>/performance/results.txt"
                                           for p in CMSIS_ANCHORS})) + "\n")


def mv2_head(cmsis_root: Path, results: Path, markdown: bool) -> None:
    """Per-op cycles of the MobileNetV2 head on the Cortex-M55 with CMSIS-NN against the Alif E8's."""
    from speed import per_layer  # bench/speed.py: one count per op

    path = results / "mobilenet_v2_head.mps3-an547.json"
    if not path.exists():
        spec = load_model_file(ROOT / "bench" / "mobilenet_v2_head.py")
        graph = to_graph(spec, "int8")
        rows = {}
        board = load_board("mps3-an547")
        for label, b, backends, root in [("cmsis_nn", board, ["cmsis-nn", "portable"], cmsis_root),
                                         ("cmsis_nn_0ws", zero_wait(board), ["cmsis-nn", "portable"], cmsis_root),
                                         ("ours", board, None, None)]:
            cm = compile_copy(spec, graph, b, backends, root)
            rows[label] = [{"op": n, "kernel": k, "instructions": i, "cycles": c} for n, k, i, c in per_layer(cm)]
        rows["cmsis_nn_tree"] = str(cmsis_root)
        path.write_text(json.dumps(rows, indent=1))
    rows = json.loads(path.read_text())
    print(f"{'### ' if markdown else ''}Calibration: MobileNetV2 (torchvision, 224x224, int8) first layers per op, "
          "Cortex-M55 (mps3-an547) against the Alif E8\n")
    t = Table(["layer", "op", "published cycles", "predicted cycles (CMSIS-NN)", "predicted / published",
               "predicted, memories at 0 wait states", "predicted / published", "instructions (CMSIS-NN)",
               "ours: kernel", "ours: cycles"], markdown)
    # The head's ops in order are the published rows' layers (then the last projection and the add).
    pairs = list(zip(MV2_ALIF_E8, rows["cmsis_nn"], rows["cmsis_nn_0ws"], rows["ours"]))
    for (name, pub), r, z, o in pairs:
        t.add([name, r["op"], f"{pub:,}", f"{r['cycles']:,}", f"{r['cycles'] / pub:.2f}", f"{z['cycles']:,}",
               f"{z['cycles'] / pub:.2f}", f"{r['instructions']:,}", o["kernel"], f"{o['cycles']:,}"])

    def total(i: int, key: str) -> int:
        return sum(row[i][key] for row in pairs)

    pub_sum = sum(pub for (_, pub), *_ in pairs)
    t.add(["sum", "", f"{pub_sum:,}", f"{total(1, 'cycles'):,}", f"{total(1, 'cycles') / pub_sum:.2f}",
           f"{total(2, 'cycles'):,}", f"{total(2, 'cycles') / pub_sum:.2f}", f"{total(1, 'instructions'):,}", "",
           f"{total(3, 'cycles'):,}"])
    t.print()
    print(f"Source: {MV2_SOURCE}. Predicted with the CMSIS-NN tree {rows.get('cmsis_nn_tree', '?')}.\n")


def splice(doc: Path, generated: str) -> list[str]:
    """Replace each ``### `` block of ``generated`` in ``doc`` (the heading line, then the blank, table and
    goal lines under it, up to the first line of prose or the next heading) by its new text; the headings
    it does not find, returned, are left out."""
    lines = doc.read_text().split("\n")
    missing: list[str] = []
    for block in generated.split("\n### ")[1:] if not generated.startswith("### ") else \
            ("\n" + generated).split("\n### ")[1:]:
        new = ("### " + block).rstrip("\n").split("\n")
        try:
            start = lines.index(new[0])
        except ValueError:
            missing.append(new[0])
            continue
        end = start + 1
        while end < len(lines) and (lines[end] == "" or lines[end].startswith("|")
                                    or lines[end].startswith("**Goal**")):
            end += 1
        lines[start:end] = new + [""]
    doc.write_text("\n".join(lines))
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=",".join(BOARDS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--cmsis-nn", type=Path, default=os.environ.get("CMSIS_NN_PATH") or None,
                        help="CMSIS-NN source tree (default: CMSIS_NN_PATH)")
    parser.add_argument("--results", type=Path, default=None, help="one JSON per (model, board); reused")
    parser.add_argument("--no-run", action="store_true", help="print from --results only, measure nothing")
    parser.add_argument("--weights-in", choices=("flash", "fast"), default=None,
                        help="where both columns' firmware keeps the weights (mcu's --weights-in; default: each "
                             "board's); fast measures into <cache>/bench_cycles-fast unless --results says")
    parser.add_argument("--markdown", action="store_true", help="Markdown tables (docs/cycles.md)")
    parser.add_argument("--splice", type=Path, default=None,
                        help="also write each per-core table and goal line into this Markdown file, in place "
                             "of the block under the same heading (docs/cycles.md)")
    parser.add_argument("--cmsis-nn-from", type=Path, default=None,
                        help="an earlier results folder (same CMSIS-NN tree and placement) to take CMSIS-NN's "
                             "column from; ours is measured and must give the outputs stored there")
    parser.add_argument("--mv2-head", action="store_true", help="also the MobileNetV2 per-op calibration on M55")
    parser.add_argument("--mv2-cmsis-nn", type=Path, default=None,
                        help="CMSIS-NN tree for --mv2-head (the anchor ran v7.0.0; default: --cmsis-nn)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    boards = [b for b in args.boards.split(",") if b]
    models = [x for x in args.models.split(",") if x]
    results = args.results or cache_dir() / ("bench_cycles-fast" if args.weights_in == "fast" else "bench_cycles")
    results.mkdir(parents=True, exist_ok=True)
    cmsis_root = None
    if not args.no_run:
        from mcu.backends.cmsis_nn.core import resolve as resolve_cmsis

        if args.cmsis_nn is None:
            raise SystemExit("bench/cycles.py measures CMSIS-NN's column: give --cmsis-nn PATH or CMSIS_NN_PATH")
        cmsis_root = resolve_cmsis(args.cmsis_nn)
        for model in models:
            measure(model, boards, cmsis_root, results, args.weights_in, args.cmsis_nn_from)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        per_core_tables(results, models, boards, args.markdown, args.weights_in)
    print(out.getvalue(), end="")
    if args.splice is not None:
        for heading in splice(args.splice, out.getvalue()):
            print(f"not in {args.splice}, left out: {heading}", file=sys.stderr)
    calibration_table(results, args.markdown)
    if args.mv2_head:
        if cmsis_root is None and not (results / "mobilenet_v2_head.mps3-an547.json").exists():
            raise SystemExit("--mv2-head has no results yet: run it without --no-run")
        if args.mv2_cmsis_nn is not None and not args.no_run:
            cmsis_root = resolve_cmsis(args.mv2_cmsis_nn)
        mv2_head(cmsis_root, results, args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
