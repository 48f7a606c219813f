"""RAM-budget sweep (not a test: minutes per model): per model, each op's instructions measured once in QEMU
(whole, and fused at 1, 2, 4 and 8 rows a pass), then every schedule the budget chooses among built and run
whole (mcu/devtools/fusion_costs.py), streamed prefixes included, then builds for a rising series of
budgets: by default each of those schedules' arenas, the whole-tensor arena and twice it. Prints those
schedules (arena, the sum of their ops' measurements, the measured run, * on the frontier of the sums),
the streamed prefixes weighed (arena, calls), and budget, arena, instructions and what was built per
build, and exits 1 when a build
does not fit its budget, fails its vectors, or runs more instructions than the build of a smaller budget,
or when a budget just below the smallest arena does not fail with the error naming it.

    .venv/bin/python bench/ram_budget.py [--board mps2-an505] [--model mobilenet_v2 ...] [--budget 40000 ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import CompiledModel, lower_file  # noqa: E402
from mcu.devtools.fusion_costs import (budget_candidates, compile_within_budget, measure_fusion_costs,  # noqa: E402
                                      measured_counts)
from mcu.errors import McuError  # noqa: E402
from mcu.plan.fused import KIND as FUSED_KIND  # noqa: E402
from mcu.plan.fusion import candidates, frontier, to_run  # noqa: E402
from mcu.plan.memory import plan_memory  # noqa: E402
from mcu.plan.prefix import KIND as PREFIX_KIND, prefix_candidates  # noqa: E402


def _built(cm: CompiledModel) -> str:
    """What a build runs: its streamed prefix (ops, bands) and its fused blocks (first op/band)."""
    parts = [f"prefix of {len(p.ops)} ops, bands {'/'.join(map(str, p.bands))}, {p.calls} calls"
             for p in (op.attrs["prefix"] for op in cm.graph.ops if op.kind == PREFIX_KIND)]
    parts += [f"{op.attrs['stages'][0].name}/{op.attrs['block'].band}" for op in cm.graph.ops if op.kind == FUSED_KIND]
    return ", ".join(parts) or "every tensor whole"


def sweep(model: str, board: str, given: list[int]) -> bool:
    lowered = lower_file(ROOT / "examples" / f"{model}.py", quantize="int8")

    def compile_for(**kwargs: object) -> CompiledModel:
        return lowered.compile(board, speed_scratch=False, **kwargs)  # type: ignore[arg-type]

    costs = measure_fusion_costs(compile_for)
    if costs is None:
        print(f"{board}: no simulator to measure the ops on", file=sys.stderr)
        return False
    whole = compile_for()
    arena = whole.memory.arena_size
    cands = candidates(whole.graph, costs)
    front = {c.schedule for c in frontier(cands)}
    runs = to_run(cands, costs)
    print(f"{model} int8 on {board}: whole tensors {arena:,} B, {whole.simulate().instructions:,} instructions; "
          f"{len(cands)} candidate schedules, {len(front)} on the frontier of the sums, {len(runs)} run")
    if len(runs) > 1:
        ops = sum(costs.ops.values())
        print(f"{'arena (B)':>10} {'ops summed':>12} {'measured':>12}  fused blocks (first op/band)")
        for c in runs:
            print(f"{c.arena:>10,} {ops + c.predicted:>12,} {costs.schedules[c.schedule]:>12,}"
                  f"{'*' if c.schedule in front else ' '} " + (", ".join(f"{n}/{b}" for n, b in c.schedule) or "none"))
    prefixes = prefix_candidates(whole.graph, lambda g: plan_memory(g).arena_size)
    for p in prefixes:
        print(f"streamed prefix {p.schedule.key()}: {p.arena:,} B, {p.calls} calls")
    combined = budget_candidates(compile_for, whole, costs, prefixes)
    counts = measured_counts(compile_for, whole, costs, combined)
    print(f"{len(combined)} schedules weighed (prefix|fused blocks: arena, predicted, measured):")
    for c in combined:
        print(f"  {c.key()}: {c.arena:,} B, {c.predicted:,}, {counts[c.key()]:,}")
    smallest = combined[0].arena
    ok = True
    try:
        compile_within_budget(compile_for, "off", smallest - 1)
        print(f"budget {smallest - 1:,} B: built, below the smallest arena  FAIL")
        ok = False
    except McuError as exc:
        good = f"the smallest arena is {smallest} B" in exc.message
        ok &= good
        print(f"budget {smallest - 1:,} B: {exc.message}{'' if good else '  FAIL'}")
    budgets = sorted(set(given) if given else {c.arena for c in combined} | {arena, 2 * arena})
    print(f"{'budget (B)':>12} {'arena (B)':>10} {'instructions':>14}  built")
    last = None
    for budget in budgets:
        cm = compile_within_budget(compile_for, "off", budget)
        run = cm.simulate()
        good = run.passed and cm.memory.arena_size <= budget and (last is None or run.instructions <= last)
        ok &= good
        last = run.instructions
        print(f"{budget:>12,} {cm.memory.arena_size:>10,} {run.instructions:>14,}{'' if good else '  FAIL'}  "
              f"{_built(cm)}", flush=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="mps2-an505")
    parser.add_argument("--model", action="append", help="example name (default: mobilenet_v2)")
    parser.add_argument("--budget", type=int, action="append", default=[],
                        help="budget in bytes (repeat; default: each run schedule's arena, whole, twice whole)")
    args = parser.parse_args()
    return 0 if all([sweep(m, args.board, args.budget) for m in args.model or ["mobilenet_v2"]]) else 1


if __name__ == "__main__":
    sys.exit(main())
