"""Backend benchmark (not a test): per reference model, fp32 and int8 on the host, the latency of
eager PyTorch, our portable kernels, XNNPACK (as many ops as it takes, in the largest partitions),
XNNPACK with a forced graph break before every op it takes (one partition per op: same kernels,
only the partition boundaries differ), and a mixed partitioning (every other op XNNPACK takes is
forced to the portable kernels). Medians of N runs of one inference, single-threaded everywhere
(XNNPACK runs without a thread pool; torch.set_num_threads(1)).

The share of latency the graph breaks cost is (per-op split - fused) / per-op split.

    .venv/bin/python bench/backends.py [--runs 50] [--models small_cnn,resnet8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from mcu.api import CompiledModel, compile_file, compile_spec  # noqa: E402
from mcu.backends.base import Context, partition  # noqa: E402
from mcu.backends.delegated import Refusing  # noqa: E402
from mcu.backends.xnnpack.core import XnnpackBackend  # noqa: E402
from mcu.device.boards import load_board  # noqa: E402
from mcu.emit.c_model import render_library  # noqa: E402
from mcu.capture.loader import load_model_file  # noqa: E402
from mcu.plan.memory import plan_memory  # noqa: E402
from mcu.pipeline import to_graph  # noqa: E402

MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder"]


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up: XNNPACK builds its runtimes on first use
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def split_per_op(name: str, quantize: str) -> CompiledModel:
    """Every op XNNPACK takes as its own partition: a graph break before each."""
    spec = load_model_file(ROOT / "examples" / f"{name}.py")
    board = load_board("host")
    graph = to_graph(spec, quantize)
    ctx = Context(board, quantize)
    xnn = XnnpackBackend()
    ops = []
    for i, op in enumerate(graph.ops):
        if xnn.refuse(op, ctx) is not None:
            ops.append(op)
            continue
        later = [t for o in graph.ops[i + 1:] for t in o.inputs]
        one = SimpleNamespace(ops=[op], outputs=[*graph.outputs, *later])
        partition(one, [xnn], ctx)
        ops += one.ops
    graph.ops = ops
    memory = plan_memory(graph, capacities=board.arena_regions())
    return CompiledModel(spec=spec, board=board, quantize=quantize, graph=graph, memory=memory,
                         library=render_library(graph, memory, quantize))


def mixed(name: str, quantize: str) -> tuple[CompiledModel, int]:
    spec = load_model_file(ROOT / "examples" / f"{name}.py")
    graph = to_graph(spec, quantize)
    ctx = Context(load_board("host"), quantize)
    taken = [op.name for op in graph.ops if XnnpackBackend().refuse(op, ctx) is None]
    model = compile_spec(spec, "host", quantize, backend=[Refusing(XnnpackBackend(), set(taken[1::2])), "portable"])
    return model, model.partitions.graph_breaks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    rows = []
    for name in args.models.split(","):
        for quantize in ("none", "int8"):
            spec = load_model_file(ROOT / "examples" / f"{name}.py")
            x = spec.test_inputs[0]
            portable = compile_file(ROOT / "examples" / f"{name}.py", "host", quantize)
            fused = compile_spec(spec, "host", quantize, backend=["xnnpack", "portable"])
            report = fused.partitions
            split = split_per_op(name, quantize)
            mix, mix_breaks = mixed(name, quantize)
            inputs = portable.encode_inputs(x)

            def run(model: CompiledModel) -> Callable[[], object]:
                host = model.host_model()
                return lambda: host.run_physical(inputs)

            with torch.no_grad():
                eager = median_ms(lambda: spec.model(*x), args.runs)
            t_port = median_ms(run(portable), args.runs)
            t_xnn = median_ms(run(fused), args.runs)
            t_split = median_ms(run(split), args.runs)
            t_mix = median_ms(run(mix), args.runs)
            n_xnn = sum(len(ops) for b, ops in report.partitions if b == "xnnpack")
            n_ops = sum(len(ops) for _, ops in report.partitions)
            n_split = sum(1 for op in split.graph.ops if op.kind == "delegate")
            rows.append((name, "fp32" if quantize == "none" else "int8", eager, t_port, t_xnn, t_split, t_mix,
                         f"{n_xnn}/{n_ops}", report.graph_breaks, n_split, mix_breaks))
            print(f"{name} {quantize}: done", file=sys.stderr)
    head = ("model", "dtype", "eager ms", "portable ms", "xnnpack ms", "per-op split ms", "mixed ms",
            "portable/xnn", "eager/xnn", "break share", "xnn ops", "breaks", "split parts", "mixed breaks")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for (name, dt, e, p, xn, sp, mx, taken, brk, nsplit, mbrk) in rows:
        share = (sp - xn) / sp if sp > 0 else float("nan")
        print(f"| {name} | {dt} | {e:.3f} | {p:.3f} | {xn:.3f} | {sp:.3f} | {mx:.3f} | {p / xn:.2f}x | "
              f"{e / xn:.2f}x | {100 * share:.0f} % | {taken} | {brk} | {nsplit} | {mbrk} |")


if __name__ == "__main__":
    main()
