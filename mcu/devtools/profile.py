"""``mcu profile``: the cost of every op on the device, from the event tracer, explained by the op table.

A :class:`Profile` joins the op table (:mod:`mcu.devtools.ops`: debug handle, kernel, shapes, MACs, source
line, bytes live) with the tracer's events (:mod:`mcu.devtools.trace`) by debug handle. It renders as a
text table sorted by cost with totals, as JSON, and as an SVG bar chart. It needs only the op table and
the events, so a compile record and a saved trace reproduce it without the model file.
"""

from __future__ import annotations

from pathlib import Path

import dataclasses
from dataclasses import asdict, dataclass
from html import escape
from typing import Any, Callable

from mcu.devtools.ops import OpInfo
from mcu.devtools.prefix_trace import PrefixTrace, fold
from mcu.devtools.trace import TraceEvent
from mcu.errors import McuError
from mcu.devtools.ops import op_table
from mcu.devtools.trace import run_traced


@dataclass(frozen=True)
class ProfileRow:
    op: OpInfo
    cost: int
    share: float  # fraction of the sum of all ops' costs
    estimated_cycles: int | None = None  # the simulator's timing model (docs/cycles.md), when it ran

    @property
    def cost_per_mac(self) -> float | None:
        return self.cost / self.op.macs if self.op.macs else None


@dataclass
class Profile:
    title: str  # "ds_cnn int8 on mps2-an505"
    unit: str  # "instructions" or "cycles"
    rows: list[ProfileRow]  # sorted by cost, largest first
    inference_cost: int | None  # the whole first inference measured around the run call, when known
    inference_of: str = "normal build"  # which firmware measured it (on hardware: the traced one)
    clock_hz: int | None = None  # the board's clock, for the estimated cycles' milliseconds
    # Where the estimate comes from when it is not the run itself: on hardware, the same model run in QEMU
    # on the board's twin with the board's memory timing and clock (mcu.device.timing.twin_board).
    predicted_on: str | None = None
    # Each op's cost in the whole-tensor schedule, by name, when the profiled build fuses blocks: what a fused
    # block's ops cost unfused, so what its row loop adds (:meth:`fusion_overhead`).
    whole_costs: dict[str, int] | None = None
    # By a streamed prefix's handle: its ops' calls and costs, from the events of its steps (prefix_trace).
    prefixes: dict[int, PrefixTrace] | None = None

    def fusion_overhead(self, op: OpInfo, cost: int) -> int | None:
        """What fused block ``op`` (measured ``cost``) runs beyond its ops run whole; None when unmeasured."""
        if op.fused is None or self.whole_costs is None:
            return None
        whole = [self.whole_costs.get(name) for name in op.fused["stages"]]
        return None if any(c is None for c in whole) else cost - sum(c for c in whole if c is not None)

    def fused_lines(self) -> list[str]:
        """One line per fused block: its loop's work beyond the ops' own (ring moves, padding rows, calls,
        rows computed again) and, when measured, its instructions beyond its ops run whole."""
        fused = sorted((r for r in self.rows if r.op.fused is not None), key=lambda r: r.op.handle)
        if not fused:
            return []
        lines = ["fused blocks (run band by band of rows; the ring keeps the rows the next band reads again):"]
        for r in fused:
            f = r.op.fused or {}
            rows = f"{f['band']} row{'s' if f['band'] > 1 else ''}"
            line = (f"{r.op.handle:>6}  {r.op.name}: {f['passes']} passes of {rows}; expanded rows "
                    f"computed {f['rows_computed']} of {f['expanded_rows']}, {f['rows_recomputed']} recomputed; "
                    f"ring moves {f['ring_moves']} x {f['ring_move_bytes']:,} B; padding rows {f['padding_rows']} x "
                    f"{f['padding_row_bytes']:,} B; {f['calls']} kernel calls ({len(f['stages'])} whole)")
            extra = self.fusion_overhead(r.op, r.cost)
            if extra is not None:
                whole = r.cost - extra
                line += (f"; {extra:+,} {self.unit} over its ops run whole"
                         + (f" ({extra / whole * 100:+.1f} %)" if whole else ""))
            lines.append(line)
        return lines

    def prefix_ops(self, op: OpInfo) -> list[dict[str, Any]]:
        """Each op of streamed prefix ``op`` (and its streamed input's reader): calls, band, instructions (the
        tracer's hooks taken out), the estimate, and what calling it per band costs beyond the op run whole."""
        trace = (self.prefixes or {}).get(op.handle)
        if op.prefix is None or trace is None:
            return []
        found = []
        entries = [*op.prefix["ops"], *([op.prefix["reader"]] if op.prefix["reader"] else [])]
        for k, entry in enumerate(entries):
            costs = trace.ops.get(k)
            if costs is None:
                continue
            whole = None if self.whole_costs is None or entry["kind"] == "read" \
                else self.whole_costs.get(entry["name"])
            # the whole op's event holds the hooks once; the prefix's costs hold none
            whole = None if whole is None else whole - trace.hooks
            found.append({**entry, "cost": costs.cost, "cycles": costs.estimated_cycles,
                          "ms": self._ms(costs.estimated_cycles), "whole_cost": whole,
                          "overhead": None if whole is None else costs.cost - whole, "recomputed_rows": 0})
        return found

    def prefix_lines(self) -> list[str]:
        """Per streamed prefix, one line per op: its calls, its instructions and estimate, and its instructions
        beyond the same op run whole (calls per band, ring moves: no row is computed twice)."""
        lines: list[str] = []
        for r in sorted((r for r in self.rows if r.op.prefix is not None), key=lambda r: r.op.handle):
            ops = self.prefix_ops(r.op)
            if not ops:
                continue
            lines.append(f"{r.op.handle:>6}  {r.op.name}: streamed prefix, {r.op.prefix['steps']} calls; nothing "
                         "recomputed (each ring keeps the halo rows the next band reads again): what an op "
                         "costs beyond the op run whole is its calls, its ring moves and its kernel's setup per call:")
            for o in ops:
                band = f"{o['band']} row{'s' if o['band'] > 1 else ''}"
                line = f"        {o['name']} ({o['kind']}): {o['calls']} calls of up to {band}, {o['cost']:,} {self.unit}"
                if o["cycles"] is not None:
                    ms = f", {o['ms']:.3f} ms" if o["ms"] is not None else ""
                    line += f" (est. {o['cycles']:,} cycles{ms})"
                if o["overhead"] is not None:
                    w = o["whole_cost"]
                    line += (f"; whole {w:,}, {o['overhead']:+,} band by band"
                             + (f" ({o['overhead'] / w * 100:+.1f} %)" if w else ""))
                elif o["kind"] == "read":
                    line += "; the input's callback (in the arena when not streamed)"
                lines.append(line)
        return lines

    @property
    def has_estimate(self) -> bool:
        return bool(self.rows) and all(r.estimated_cycles is not None for r in self.rows)

    @property
    def total_estimated_cycles(self) -> int | None:
        return sum(r.estimated_cycles or 0 for r in self.rows) if self.has_estimate else None

    @property
    def measured_cycles(self) -> bool:
        """The costs are cycles measured on a chip, and the estimate beside them is the model's prediction."""
        return self.unit == "cycles" and self.has_estimate

    @staticmethod
    def _ratio(predicted: int | None, measured: int) -> float | None:
        return predicted / measured if predicted is not None and measured else None

    def _ms(self, cycles: int | None) -> float | None:
        return cycles / self.clock_hz * 1e3 if cycles is not None and self.clock_hz else None

    @property
    def total_cost(self) -> int:
        return sum(r.cost for r in self.rows)

    @property
    def total_macs(self) -> int:
        return sum(r.op.macs for r in self.rows)

    def table(self) -> str:
        est = self.has_estimate
        vs = self.measured_cycles
        est_head = (f" {'est. cycles':>12}" if est else "") + (f" {'est/meas':>8}" if vs else "")
        head = (f"{'handle':>6}  {'op':<20} {'kind':<17} {'kernel':<32} {'output':<16} {'MACs':>10} "
                f"{self.unit:>12}{est_head} {'share':>6} {'/MAC':>6} {'live B':>8}  source")
        lines = [f"profile: {self.title} ({self.unit}, first test vector)", head, "-" * len(head)]
        for r in self.rows:
            per_mac = f"{r.cost_per_mac:6.2f}" if r.cost_per_mac is not None else f"{'-':>6}"
            shape = "x".join(map(str, r.op.output_shapes[0])) if r.op.output_shapes else ""
            est_col = f" {r.estimated_cycles:>12,}" if est else ""
            if vs:
                ratio = self._ratio(r.estimated_cycles, r.cost)
                est_col += f" {ratio:8.2f}" if ratio is not None else f" {'-':>8}"
            lines.append(f"{r.op.handle:>6}  {r.op.name[:20]:<20} {r.op.kind[:17]:<17} {r.op.kernel[:32]:<32} "
                         f"{shape[:16]:<16} {r.op.macs:>10,} {r.cost:>12,}{est_col} {r.share * 100:5.1f}% {per_mac} "
                         f"{r.op.live_bytes:>8,}  {r.op.source}")
        lines.append("-" * len(head))
        total_per_mac = f"{self.total_cost / self.total_macs:6.2f}" if self.total_macs else f"{'-':>6}"
        label = f"{'total':>6}  {len(self.rows)} ops"
        est_total = f" {self.total_estimated_cycles:>12,}" if est else ""
        if vs:
            ratio = self._ratio(self.total_estimated_cycles, self.total_cost)
            est_total += f" {ratio:8.2f}" if ratio is not None else f" {'-':>8}"
        lines.append(f"{label:<97} {self.total_macs:>10,} {self.total_cost:>12,}{est_total} {100.0:5.1f}% "
                     f"{total_per_mac}")
        if est:
            ms = self._ms(self.total_estimated_cycles)
            at = f" = {ms:.3f} ms at {self.clock_hz / 1e6:g} MHz" if ms is not None and self.clock_hz else ""
            if self.predicted_on is not None:
                lines.append(f"est. cycles: the per-core timing model's prediction for each op, from the same model run in "
                             f"QEMU on {self.predicted_on}{at} (an estimate, docs/cycles.md); est/meas: predicted / "
                             "measured, the model's error on this chip")
            else:
                lines.append(f"est. cycles: the simulator's per-core timing model over the same ops{at} "
                             "(an estimate, docs/cycles.md)")
        if self.inference_cost:
            outside = self.inference_cost - self.total_cost
            # The ops are traced in their own build; with no input copy left outside them (an input read where
            # the caller keeps it), the hooks' register use can make them a few more than the normal whole.
            why = (f"{outside:,} outside the ops: input/output copies and the call sequence" if outside >= 0 else
                   f"the traced ops {-outside:,} more: the tracer's hooks change the code around each op")
            lines.append(f"whole inference ({self.inference_of}) {self.inference_cost:,} {self.unit}: the ops account for "
                         f"{self.total_cost / self.inference_cost * 100:.2f} % ({why})")
        lines += self.fused_lines()
        lines += self.prefix_lines()
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title, "unit": self.unit, "inference_cost": self.inference_cost,
            "total_cost": self.total_cost, "total_macs": self.total_macs,
            "cycles": self.total_estimated_cycles, "ms": self._ms(self.total_estimated_cycles),
            "cycles_are_estimates": self.has_estimate, "predicted_on": self.predicted_on,
            "predicted_over_measured": self._ratio(self.total_estimated_cycles, self.total_cost)
            if self.measured_cycles else None,
            "ops": [{**asdict(r.op), "cost": r.cost, "share": r.share, "cost_per_mac": r.cost_per_mac,
                     "fusion_overhead": self.fusion_overhead(r.op, r.cost),
                     **({"prefix_ops": self.prefix_ops(r.op)} if r.op.prefix is not None else {}),
                     "cycles": r.estimated_cycles, "ms": self._ms(r.estimated_cycles),
                     "predicted_over_measured": self._ratio(r.estimated_cycles, r.cost) if self.measured_cycles else None}
                    for r in self.rows],
        }

    def svg(self, width: int = 1000) -> str:
        """A horizontal bar per op, largest first, labelled with its handle, name, kernel and share."""
        bar_h, gap, left, right, top = 18, 6, 330, 150, 56
        subs = {r.op.handle: self.prefix_ops(r.op) for r in self.rows if r.op.prefix is not None}
        height = top + (len(self.rows) + sum(len(v) for v in subs.values())) * (bar_h + gap) + 30
        biggest = max((r.cost for r in self.rows), default=1) or 1
        pw = width - left - right
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
            f"<title>{escape(self.title)}: cost per op</title>",
            '<rect x="0" y="0" width="100%" height="100%" fill="white"/>',
            f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(self.title)}: {self.unit} per op</text>',
            f'<text x="10" y="40">total {self.total_cost:,} {self.unit} over {len(self.rows)} ops'
            + (f", whole inference {self.inference_cost:,}" if self.inference_cost else "") + "</text>",
        ]
        i = -1
        for r in self.rows:
            i += 1
            y = top + i * (bar_h + gap)
            w = max(r.cost / biggest * pw, 1.0)
            label = f"#{r.op.handle} {r.op.name} ({r.op.kernel})"
            parts += [
                f'<text x="{left - 6}" y="{y + bar_h - 5}" text-anchor="end">{escape(label[:52])}</text>',
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="#4e79a7">'
                f"<title>{escape(label)}: {r.cost:,} {self.unit}, {r.op.macs:,} MACs, "
                f"{r.op.live_bytes:,} B live; {escape(r.op.source)}</title></rect>",
                f'<text x="{left + w + 6:.1f}" y="{y + bar_h - 5}">{r.cost:,} ({r.share * 100:.1f} %)</text>',
            ]
            for o in subs.get(r.op.handle, []):
                # a prefix's op under it: the op run whole, and what calling it per band adds
                i += 1
                y = top + i * (bar_h + gap)
                whole = o["cost"] if o["whole_cost"] is None else min(o["whole_cost"], o["cost"])
                ww, wo = whole / biggest * pw, max(o["cost"] - whole, 0) / biggest * pw
                label = f"  {o['name']}: {o['calls']} calls"
                extra = "" if o["overhead"] is None else f", {o['overhead']:+,} over the op run whole"
                parts += [
                    f'<text x="{left - 6}" y="{y + bar_h - 5}" text-anchor="end">{escape(label[:52])}</text>',
                    f'<rect class="prefix-op" x="{left}" y="{y}" width="{max(ww, 1.0):.1f}" height="{bar_h}" '
                    f'fill="#a0cbe8"><title>{escape(o["name"])} in streamed prefix {escape(r.op.name)}: '
                    f'{o["cost"]:,} {self.unit} in {o["calls"]} calls{extra}</title></rect>',
                    f'<rect class="prefix-overhead" x="{left + ww:.1f}" y="{y}" width="{wo:.1f}" height="{bar_h}" '
                    f'fill="#f28e2b"><title>calls per band, ring moves, the kernel\'s work per call{extra}</title></rect>',
                    f'<text x="{left + ww + wo + 6:.1f}" y="{y + bar_h - 5}">{o["cost"]:,}{escape(extra)}</text>',
                ]
        parts.append("</svg>")
        return "\n".join(parts) + "\n"


def make_profile(title: str, unit: str, ops: list[OpInfo], events: list[TraceEvent],
                 inference_cost: int | None, inference_of: str = "normal build",
                 clock_hz: int | None = None, predicted_on: str | None = None) -> Profile:
    """Join the op table and the events by debug handle; every traced op must be in the table and vice versa."""
    by_handle = {op.handle: op for op in ops}
    seen = [e.handle for e in events]
    if sorted(seen) != sorted(by_handle):
        missing = sorted(set(by_handle) - set(seen))
        unknown = sorted(set(seen) - set(by_handle))
        raise McuError(f"the trace does not match the op table (ops without an event: {missing}, events for "
                       f"unknown handles: {unknown})", hint="profile the firmware built from the same compile")
    total = sum(e.cost for e in events) or 1
    rows = [ProfileRow(op=by_handle[e.handle], cost=e.cost, share=e.cost / total,
                       estimated_cycles=e.estimated_cycles) for e in events]
    rows.sort(key=lambda r: (-r.cost, r.op.handle))
    return Profile(title=title, unit=unit, rows=rows, inference_cost=inference_cost, inference_of=inference_of,
                   clock_hz=clock_hz, predicted_on=predicted_on)


def join_prediction(measured: list[TraceEvent], ops: list[OpInfo], predicted: list[TraceEvent],
                    predicted_ops: list[OpInfo]) -> list[TraceEvent]:
    """The measured events with each op's predicted cycles (``estimated_cycles``) from a run of the same
    model on the simulated twin, joined by debug handle. The two builds must run the same ops with the same
    kernels; a prediction for other code would be no prediction, so a difference is an error naming it."""
    kernel = {op.handle: op.kernel for op in ops}
    twin_kernel = {op.handle: op.kernel for op in predicted_ops}
    differ = sorted(h for h in set(kernel) | set(twin_kernel) if kernel.get(h) != twin_kernel.get(h))
    if differ:
        h = differ[0]
        raise McuError(f"the simulated twin runs other kernels than the board (op {h}: {kernel.get(h)} on the "
                       f"board, {twin_kernel.get(h)} on the twin): no per-op prediction",
                       hint="the twin must be a board with the same core and compiler flags (sim.twin)")
    cycles = {e.handle: e.estimated_cycles for e in predicted}
    if any(cycles.get(e.handle) is None for e in measured):
        raise McuError("the simulated twin's run has no cycle estimate for every op",
                       hint="the twin's core needs a timing model (docs/cycles.md)")
    return [dataclasses.replace(e, estimated_cycles=cycles[e.handle]) for e in measured]


def events_json(profile: Profile, run: Any) -> dict[str, Any]:
    """What ``mcu profile --events`` saves: the trace with the normal build's whole-inference cost."""
    return {**run.to_json(), "inference_cost": profile.inference_cost, "traced_inference_cost": run.inference_cost,
            "clock_hz": profile.clock_hz, "predicted_on": profile.predicted_on,
            "events": [asdict(r) for r in _events_in_order(profile, run)]}


def _events_in_order(profile: Profile, run: Any) -> list[TraceEvent]:
    """The run's events in execution order with the profile's estimates (on hardware: the twin's prediction)."""
    estimate = {r.op.handle: r.estimated_cycles for r in profile.rows}
    return [dataclasses.replace(e, estimated_cycles=estimate.get(e.handle, e.estimated_cycles)) for e in run.events]


def out_lines(console: str) -> list[str]:
    """The harness's OUT lines: every output of every bundled vector, as raw words."""
    return [line.strip() for line in console.splitlines() if line.startswith("OUT ")]


def predict_on_twin(cm: Any, ops: list[OpInfo], events: list[TraceEvent], compile_for: Callable[[Any], Any],
                    timeout_s: float = 600.0) -> tuple[list[TraceEvent], str]:
    """A hardware board's measured events with the timing model's prediction per op: ``compile_for`` compiles the
    same model for the board's simulated twin (mcu.device.timing.twin_board: its core and flags, the board's
    memory timing and clock), whose traced firmware runs in QEMU with the plugin. Returns the events and where
    the prediction ran."""
    # lazy: keeps the device layer's board files out of this module's import
    from mcu.device.timing import twin_board

    twin = twin_board(cm.board)
    twin_cm = compile_for(twin)
    run = run_traced(twin_cm, timeout_s=timeout_s)
    if not run.passed:
        raise McuError(f"the prediction's firmware of {cm.spec.name} failed its bundled vectors on {twin.qemu_machine}",
                       hint=run.console.strip()[-1500:])
    joined = join_prediction(events, ops, run.events, op_table(twin_cm.graph, twin_cm.memory, twin_cm.library))
    return joined, f"{cm.board.sim_twin} with {cm.board.name}'s memory timing"


def whole_op_costs(whole: Any, timeout_s: float = 600.0) -> dict[str, int]:
    """Each op's cost by name in ``whole`` (the model compiled with every tensor whole), traced on its simulator."""
    run = run_traced(whole, timeout_s=timeout_s)
    if not run.passed:
        raise McuError(f"the whole-tensor firmware of {whole.spec.name} failed its bundled vectors",
                       hint=run.console.strip()[-1500:])
    name = {op.handle: op.name for op in op_table(whole.graph, whole.memory, whole.library)}
    return {name[e.handle]: e.cost for e in run.events if e.handle in name}


def profile_model(cm: Any, timeout_s: float = 600.0, port: str | None = None, drive: Path | None = None,
                  search_dirs: Any = None, compile_for: Callable[[Any], Any] | None = None,
                  whole_for: Callable[[], Any] | None = None) -> tuple[Profile, Any]:
    """Trace ``cm``'s firmware on its simulator (or a Pico 2 / Pico over USB: ``port``, ``drive``); the
    profile and the trace run (events, outputs).

    In simulation the normal firmware runs too: its whole-inference count is the figure the ops must add
    up to, and both firmwares must print the same outputs for every bundled vector (the tracer changes no
    result). On hardware the traced firmware checks its outputs against the bundled vectors itself, and
    the total is its own CYCLES line (tracer included). ``whole_for``: the same model compiled with every
    tensor whole; when ``cm`` runs fused blocks, in simulation, its ops are traced too, so that the profile
    says what each block's row loop costs beyond its ops run whole.
    """
    run = run_traced(cm, timeout_s=timeout_s, port=port, drive=drive, search_dirs=search_dirs)
    if not run.passed:
        raise McuError(f"the profiling firmware of {cm.spec.name} failed its bundled vectors",
                       hint=run.console.strip()[-1500:])
    run.events, prefixes = fold(run.events)
    ops = op_table(cm.graph, cm.memory, cm.library)
    if cm.board.deploy_method == "uf2":
        title = f"{cm.spec.name} {cm.quantize} on {cm.board.name} (cycles measured on the chip)"
        events, predicted_on = run.events, None
        if compile_for is not None and cm.board.sim_twin is not None:
            events, predicted_on = predict_on_twin(cm, ops, run.events, compile_for, timeout_s)
        profile = make_profile(title, run.unit, ops, events, run.inference_cost, "traced build, hooks included",
                               clock_hz=cm.board.clock_hz, predicted_on=predicted_on)
        profile.prefixes = prefixes
        return profile, run
    normal = cm.simulate(timeout_s=timeout_s)
    if out_lines(normal.console) != out_lines(run.console):
        raise McuError(f"the profiling and normal firmwares of {cm.spec.name} print different outputs",
                       hint="the tracer hooks must not change what a model computes: report this as a bug")
    title = f"{cm.spec.name} {cm.quantize} on {cm.board.name}"
    profile = make_profile(title, run.unit, ops, run.events, normal.instructions, clock_hz=cm.board.clock_hz)
    profile.prefixes = prefixes
    if whole_for is not None and any(op.fused is not None or op.prefix is not None for op in ops):
        profile.whole_costs = whole_op_costs(whole_for(), timeout_s)
    return profile, run
