"""The instructions of a model's schedules that the RAM budget chooses from, measured on the board's simulator
(mcu/plan/fusion.py's :class:`FusionCosts`).

First each op alone: one profile of the whole-tensor schedule and one of every block fused at each band
give the count of every op in every candidate schedule, and so the sum that predicts each schedule's
count. A sum can be off by a few tenths of a percent (an op's count can depend on where the plan puts its
tensors), enough to rank two close schedules the wrong way, so then the schedules of the frontier (those
no other beats in both arena and predicted count) and those the sums put close behind them
(mcu/plan/fusion.py's ``to_run``) that fit the budget are built and run whole, and the budget chooses
among those counts (the schedules the profiles built, every tensor whole and every block fused at one
band, count as run: each profile runs its normal build too). Everything is kept in the cache, keyed by the generated C of the
whole-tensor schedule, the board and the kernels' sources; a schedule once run is never run again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from mcu.devtools.profile import profile_model
from mcu.errors import McuError
from mcu.paths import all_kernel_sources, cache_dir
from mcu.plan.fused import KIND as FUSED_KIND, find_chains
from mcu.plan.fusion import (Combined, FusionCosts, Schedule, candidates, choose, choose_fastest,
                             combined_candidates, to_run)
from mcu.plan.memory import plan_memory
from mcu.plan.prefix import PrefixCandidate, choose_schedule, prefix_candidates, with_prefix
from mcu.progress import stage

BANDS = (1, 2, 4, 8)


def _op_costs(cm: Any) -> tuple[dict[str, int], int | None]:
    """Each op's instructions by name, and the whole inference of the normal build (the profile runs it)."""
    profile, _ = profile_model(cm)
    return {row.op.name: row.cost for row in profile.rows}, profile.inference_cost


def _key(cm: Any, bands: tuple[int, ...]) -> str:
    h = hashlib.sha256(f"{cm.board.name}\0{cm.quantize}\0{bands}".encode())
    for name in sorted(cm.library.files):
        h.update(name.encode() + b"\0" + cm.library.files[name].encode() + b"\0")
    for path in all_kernel_sources():
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def _load(path: Path) -> FusionCosts | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return FusionCosts(data["ops"], {(name, band): cost for name, band, cost in data["fused"]},
                       {tuple((name, band) for name, band in s): n for s, n in data.get("schedules", [])})


def _save(path: Path, costs: FusionCosts) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"ops": costs.ops, "fused": [[n, b, c] for (n, b), c in sorted(costs.fused.items())],
                               "schedules": [[[list(f) for f in s], n] for s, n in sorted(costs.schedules.items())]}))
    tmp.replace(path)


def _measure_ops(compile_for: Callable[..., Any], whole: Any, bands: tuple[int, ...]) -> FusionCosts:
    """The ops' counts, and the whole inference of the schedules these profiles run anyway (every tensor
    whole, every block fused at one band), which are candidates of their own."""
    ops, run = _op_costs(whole)
    schedules: dict[Schedule, int] = {} if run is None else {(): run}
    fused: dict[tuple[str, int], int] = {}
    chains = find_chains(whole.graph)
    for band in bands if chains else ():  # no block to fuse: nothing more to profile
        cm = compile_for(fuse_blocks="all", fuse_band=band)
        firsts = {op.name: op.attrs["stages"][0].name for op in cm.graph.ops if op.kind == FUSED_KIND}
        costs, run = _op_costs(cm)
        for name, cost in costs.items():
            if name in firsts:
                fused[(firsts[name], band)] = cost
        if run is not None:
            schedules[tuple((c[0].name, band) for c in chains)] = run
    return FusionCosts(ops, fused, schedules)


def _measure_schedules(compile_for: Callable[..., Any], whole: Any, costs: FusionCosts, budget: int | None,
                       path: Path) -> FusionCosts:
    """``costs`` with the whole inference of every schedule to run of at most ``budget`` bytes (None: all)."""
    runs = to_run(candidates(whole.graph, costs), costs)
    fitting = [c for c in runs if budget is None or c.arena <= budget]
    if len(fitting) < 2:  # nothing to rank
        return costs
    todo = [c for c in fitting if c.schedule not in costs.schedules]
    schedules = dict(costs.schedules)
    for i, c in enumerate(todo):
        with stage(f"run schedule {i + 1} of {len(todo)} ({c.arena:,} B arena)"):
            # Runs made up so that this schedule is the fastest: a budget of its arena then builds it.
            only = FusionCosts(costs.ops, costs.fused, {r.schedule: int(r is not c) for r in runs})
            cm = compile_for(fuse_blocks="off", ram_budget=c.arena, fuse_costs=only)
            built = tuple(op.attrs["stages"][0].name for op in cm.graph.ops if op.kind == FUSED_KIND)
            if built != tuple(name for name, _ in c.schedule) or cm.memory.arena_size != c.arena:
                raise McuError(f"the schedule built for a {c.arena} B budget is not the one chosen for it "
                               f"({built} against {c.schedule})", hint="report this as a bug")
            run = cm.simulate()
            if not run.passed or run.instructions is None:
                raise McuError(f"a schedule of {cm.spec.name} failed its bundled vectors on {cm.board.name}",
                               hint=run.console.strip()[-1500:])
            schedules[c.schedule] = run.instructions
            costs = FusionCosts(costs.ops, costs.fused, dict(schedules))
            _save(path, costs)  # an interrupted measurement keeps what it ran
    return costs


def measure_fusion_costs(compile_for: Callable[..., Any], bands: tuple[int, ...] = BANDS,
                         budget: int | None = None, whole: Any = None) -> FusionCosts | None:
    """``compile_for(fuse_blocks=..., fuse_band=..., ram_budget=..., fuse_costs=...)``: the model compiled for
    the board in question (fuse_blocks "off" for the whole-tensor schedule, "all" for every block fused at
    the band). ``budget``: the schedules to run that fit it are run (None: every one). A budget below
    every arena the blocks reach fails here, before anything is measured (naming what the smallest arena
    runs when that was measured before). None when the board has no simulator. ``whole``: the whole-tensor
    build when the caller has it."""
    whole = whole if whole is not None else compile_for(fuse_blocks="off", fuse_band=1)
    simulated = whole.board.qemu_machine is not None
    path = cache_dir() / "fusion-costs" / f"{_key(whole, bands)}.json"
    costs = _load(path) if simulated else None
    if budget is not None:
        try:
            choose(whole.graph, budget)
        except McuError:
            if costs is not None:  # measured before: the error says what the smallest arena runs
                choose_fastest(whole.graph, budget, costs)
            raise
    if not simulated:  # a board without a simulator: the budget fuses as few blocks as fit
        return None
    if costs is None:
        costs = _measure_ops(compile_for, whole, bands)
        _save(path, costs)
    return _measure_schedules(compile_for, whole, costs, budget, path)


def _measured_run(cm: Any) -> int:
    run = cm.simulate()
    if not run.passed or run.instructions is None:
        raise McuError(f"a schedule of {cm.spec.name} failed its bundled vectors on {cm.board.name}",
                       hint=run.console.strip()[-1500:])
    return int(run.instructions)


def _prefix_runs(compile_for: Callable[..., Any], cands: list[PrefixCandidate], path: Path,
                 stream: bool = False) -> dict[str, int]:
    """The whole inference of each streamed prefix of ``cands`` (cached by its key beside the fusion costs)."""
    runs: dict[str, int] = json.loads(path.read_text()) if path.is_file() else {}
    for i, c in enumerate(cands):
        if c.schedule.key() in runs:
            continue
        with stage(f"run streamed prefix {i + 1} of {len(cands)} ({c.arena:,} B arena)"):
            cm = compile_for(fuse_blocks="off", stream_prefix=c.schedule, stream_input=stream)
            if cm.memory.arena_size != c.arena:
                raise McuError(f"the streamed prefix {c.schedule.key()} built a {cm.memory.arena_size} B arena, "
                               f"not the {c.arena} B planned", hint="report this as a bug")
            runs[c.schedule.key()] = _measured_run(cm)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(runs, sort_keys=True))
            tmp.replace(path)
    return runs


def compile_streamed_within_budget(compile_for: Callable[..., Any], stream: bool, budget: int) -> Any:
    """``--stream-prefix``/``--stream-input`` with a RAM budget: of the streamed schedules that no other beats
    in both arena and calls (every end and band of mcu/plan/prefix.py, a set that does not depend on the
    budget), the one that fits ``budget`` and ran the fewest instructions on the board's simulator (each
    run once, cached). When none fits, the unmeasured build names the smallest arena."""
    whole = compile_for(fuse_blocks="off", fuse_band=1)
    found = choose_schedule(whole.graph, stream, lambda g: plan_memory(g).arena_size, every=True)
    plans = [p for p in found.arenas if p is not None]
    cands: list[PrefixCandidate] = []
    for plan in sorted(plans, key=lambda p: (found.arenas[p], found.calls[p], p.end)):
        if not cands or found.calls[plan] < cands[-1].calls:
            cands.append(PrefixCandidate(plan, found.arenas[plan], found.calls[plan]))
    fitting = [c for c in cands if c.arena <= budget]
    if not fitting or whole.board.qemu_machine is None:
        return compile_for(fuse_blocks="off", ram_budget=budget, stream_prefix=True, stream_input=stream)
    path = cache_dir() / "fusion-costs" / f"{_key(whole, BANDS)}-{'input' if stream else 'prefix'}.json"
    runs = _prefix_runs(compile_for, fitting, path, stream)
    best = min(fitting, key=lambda c: (runs[c.schedule.key()], c.arena))
    return compile_for(fuse_blocks="off", stream_prefix=best.schedule, stream_input=stream)


def build_schedule(compile_for: Callable[..., Any], whole: Any, costs: FusionCosts, c: Combined) -> Any:
    """The build of ``c``: its prefix as given, then, with runs made up so that its fused blocks are the
    fastest of the rest's schedules, a budget of its arena."""
    if not c.fused:
        return compile_for(fuse_blocks="off", stream_prefix=c.prefix) if c.prefix else whole
    g = whole.graph if c.prefix is None else with_prefix(whole.graph, c.prefix)
    only = FusionCosts(costs.ops, costs.fused,
                       {r.schedule: int(r.schedule != c.fused) for r in to_run(candidates(g, costs), costs)})
    cm = compile_for(fuse_blocks="off", stream_prefix=c.prefix or False, ram_budget=c.arena, fuse_costs=only)
    # a band is cut to the block's height when built, so the blocks are compared by name
    built = tuple(op.attrs["stages"][0].name for op in cm.graph.ops if op.kind == FUSED_KIND)
    if built != tuple(name for name, _ in c.fused) or cm.memory.arena_size != c.arena:
        raise McuError(f"the schedule {c.key()} built {built} in a {cm.memory.arena_size} B arena, not the "
                       f"{c.arena} B planned", hint="report this as a bug")
    return cm


def _combined_runs(compile_for: Callable[..., Any], whole: Any, costs: FusionCosts, cands: list[Combined],
                   path: Path, costs_path: Path) -> dict[str, int]:
    """The whole inference of each of ``cands`` by key, each run once (cached: fused blocks alone with the
    fusion costs, a prefix's schedules beside them)."""
    runs: dict[str, int] = json.loads(path.read_text()) if path.is_file() else {}
    schedules = dict(costs.schedules)
    found: dict[str, int] = {}
    for i, c in enumerate(cands):
        known = schedules.get(c.fused) if c.prefix is None else runs.get(c.key())
        if known is None:
            with stage(f"run schedule {i + 1} of {len(cands)} ({c.arena:,} B arena)"):
                known = _measured_run(build_schedule(compile_for, whole, costs, c))
            if c.prefix is None:
                schedules[c.fused] = known
                _save(costs_path, FusionCosts(costs.ops, costs.fused, dict(schedules)))
            else:
                runs[c.key()] = known
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(runs, sort_keys=True))
                tmp.replace(path)
        found[c.key()] = known
    return found


def compile_within_budget(compile_for: Callable[..., Any], fuse: str, budget: int, prefixed: bool = False) -> Any:
    """The fastest build of the model within ``budget`` bytes of arena, by measured instructions: of the
    schedules of mcu/plan/fusion.py's :func:`combined_candidates` (no streamed prefix or one of
    :func:`prefix_candidates`, the whole input in the arena, then fused blocks or none in the rest), those
    that fit, each run once on the board's simulator (cached). The set and its counts do not depend on the
    budget, so a larger budget never builds a slower schedule. When nothing fits, the error names the
    smallest arena and what it runs. ``prefixed``: only the schedules with a streamed prefix
    (``--stream-prefix``). Without a simulator: :func:`_unmeasured_within_budget`."""
    whole = compile_for(fuse_blocks="off", fuse_band=1)
    if whole.board.qemu_machine is None:
        return _unmeasured_within_budget(compile_for, whole, fuse, budget)
    costs_path = cache_dir() / "fusion-costs" / f"{_key(whole, BANDS)}.json"
    path = cache_dir() / "fusion-costs" / f"{_key(whole, BANDS)}-prefix.json"

    def arena_of(g: Any) -> int:
        return int(plan_memory(g).arena_size)

    prefixes = prefix_candidates(whole.graph, arena_of)
    costs = _load(costs_path)
    if costs is None:
        # Nothing measured yet: a budget below every arena that the fewest fused blocks reach, after each
        # prefix or none, fails before minutes of measurement (band 1 is not always the smallest ring, so
        # only when no prefix is below it either).
        _unmeasured_error(whole, budget, prefixes)
        costs = _measure_ops(compile_for, whole, BANDS)
        _save(costs_path, costs)
    cands = [c for c in budget_candidates(compile_for, whole, costs, prefixes) if c.prefix or not prefixed]
    if not cands:
        raise McuError("--stream-prefix with a RAM budget: no streamed prefix of this model is smaller than every "
                       "tensor whole", hint="drop --stream-prefix")
    fitting = [c for c in cands if c.arena <= budget]
    blocks = len(find_chains(whole.graph))
    if not fitting:
        least = [c for c in cands if c.arena == cands[0].arena]
        counts = _combined_runs(compile_for, whole, costs, least, path, costs_path)
        smallest = min(least, key=lambda c: (counts[c.key()], c.prefix is not None, c.key()))
        hint = f"raise --ram-budget to at least {smallest.arena}, or " + (
            "stream the input (--stream-input)" if prefixes else "use a smaller model or input")
        raise McuError(f"no schedule fits a RAM budget of {budget} B: the smallest arena is {smallest.arena} B, "
                       f"with {smallest.describe(blocks)}, {counts[smallest.key()]:,} instructions (measured; "
                       f"every tensor whole: {whole.memory.arena_size} B)", hint=hint)
    counts = _combined_runs(compile_for, whole, costs, fitting, path, costs_path)
    best = min(fitting, key=lambda c: (counts[c.key()], c.arena, c.prefix is not None, c.key()))
    return build_schedule(compile_for, whole, costs, best)


def budget_candidates(compile_for: Callable[..., Any], whole: Any, costs: FusionCosts,
                      prefixes: list[PrefixCandidate]) -> list[Combined]:
    """mcu/plan/fusion.py's :func:`combined_candidates` of the model (``whole``: its whole-tensor build,
    ``costs``: its ops measured, ``prefixes``: its :func:`prefix_candidates`), every prefix run once first
    (cached): their runs predict the schedules that start with them."""
    path = cache_dir() / "fusion-costs" / f"{_key(whole, BANDS)}-prefix.json"
    return combined_candidates(whole.graph, costs, prefixes, _prefix_runs(compile_for, prefixes, path))


def measured_counts(compile_for: Callable[..., Any], whole: Any, costs: FusionCosts,
                    cands: list[Combined]) -> dict[str, int]:
    """The whole inference of each of ``cands`` by key, each run once (cached)."""
    key = _key(whole, BANDS)
    return _combined_runs(compile_for, whole, costs, cands, cache_dir() / "fusion-costs" / f"{key}-prefix.json",
                          cache_dir() / "fusion-costs" / f"{key}.json")


def _unmeasured_error(whole: Any, budget: int, prefixes: list[PrefixCandidate]) -> None:
    """McuError when ``budget`` is below every arena that the fewest fused blocks reach, after each streamed
    prefix of ``prefixes`` or none, naming the smallest of them (nothing measured)."""
    reach: list[tuple[int, str]] = [(choose(whole.graph).smallest, "")]
    for p in prefixes:
        after = choose(with_prefix(whole.graph, p.schedule)).smallest
        reach += [(p.arena, f"with {p.schedule.describe()}, {p.calls} calls; ")]
        if after < p.arena:
            reach += [(after, f"with {p.schedule.describe()}, then fused blocks; ")]
    arena, what = min(reach, key=lambda r: (r[0], r[1] != ""))
    if budget >= arena:
        return
    if not what:
        choose(whole.graph, budget)  # raises, naming the fused blocks' smallest arena
    raise McuError(f"no schedule fits a RAM budget of {budget} B: the smallest arena is {arena} B, {what}every "
                   f"tensor whole: {whole.memory.arena_size} B",
                   hint=f"raise --ram-budget to at least {arena}, or stream the input (--stream-input)")


def _unmeasured_within_budget(compile_for: Callable[..., Any], whole: Any, fuse: str, budget: int) -> Any:
    """A board without a simulator: the fewest fused blocks that fit, else the streamed prefix of the fewest
    calls that fits."""
    def arena_of(g: Any) -> int:
        return int(plan_memory(g).arena_size)

    try:
        return compile_for(fuse_blocks=fuse, ram_budget=budget, fuse_costs=None)
    except McuError:
        prefixes = prefix_candidates(whole.graph, arena_of)
        fitting = [c for c in prefixes if c.arena <= budget]
        if not fitting:
            _unmeasured_error(whole, budget, prefixes)
            raise
        best = min(fitting, key=lambda c: (c.calls, c.arena))
        return compile_for(fuse_blocks="off", stream_prefix=best.schedule)
