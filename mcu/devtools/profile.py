"""``mcu profile``: the cost of every op on the device, from the event tracer, explained by the op table.

A :class:`Profile` joins the op table (:mod:`mcu.devtools.ops`: debug handle, kernel, shapes, MACs, source
line, bytes live) with the tracer's events (:mod:`mcu.devtools.trace`) by debug handle. It renders as a
text table sorted by cost with totals, as JSON, and as an SVG bar chart. It needs only the op table and
the events, so a compile record and a saved trace reproduce it without the model file.
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import asdict, dataclass
from html import escape
from typing import Any

from mcu.devtools.ops import OpInfo
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

    @property
    def has_estimate(self) -> bool:
        return bool(self.rows) and all(r.estimated_cycles is not None for r in self.rows)

    @property
    def total_estimated_cycles(self) -> int | None:
        return sum(r.estimated_cycles or 0 for r in self.rows) if self.has_estimate else None

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
        est_head = f" {'est. cycles':>12}" if est else ""
        head = (f"{'handle':>6}  {'op':<20} {'kind':<17} {'kernel':<32} {'output':<16} {'MACs':>10} "
                f"{self.unit:>12}{est_head} {'share':>6} {'/MAC':>6} {'live B':>8}  source")
        lines = [f"profile: {self.title} ({self.unit}, first test vector)", head, "-" * len(head)]
        for r in self.rows:
            per_mac = f"{r.cost_per_mac:6.2f}" if r.cost_per_mac is not None else f"{'-':>6}"
            shape = "x".join(map(str, r.op.output_shapes[0])) if r.op.output_shapes else ""
            est_col = f" {r.estimated_cycles:>12,}" if est else ""
            lines.append(f"{r.op.handle:>6}  {r.op.name[:20]:<20} {r.op.kind[:17]:<17} {r.op.kernel[:32]:<32} "
                         f"{shape[:16]:<16} {r.op.macs:>10,} {r.cost:>12,}{est_col} {r.share * 100:5.1f}% {per_mac} "
                         f"{r.op.live_bytes:>8,}  {r.op.source}")
        lines.append("-" * len(head))
        total_per_mac = f"{self.total_cost / self.total_macs:6.2f}" if self.total_macs else f"{'-':>6}"
        label = f"{'total':>6}  {len(self.rows)} ops"
        est_total = f" {self.total_estimated_cycles:>12,}" if est else ""
        lines.append(f"{label:<97} {self.total_macs:>10,} {self.total_cost:>12,}{est_total} {100.0:5.1f}% "
                     f"{total_per_mac}")
        if est:
            ms = self._ms(self.total_estimated_cycles)
            at = f" = {ms:.3f} ms at {self.clock_hz / 1e6:g} MHz" if ms is not None and self.clock_hz else ""
            lines.append(f"est. cycles: the simulator's per-core timing model over the same ops{at} "
                         "(an estimate, docs/cycles.md)")
        if self.inference_cost:
            outside = self.inference_cost - self.total_cost
            lines.append(f"whole inference ({self.inference_of}) {self.inference_cost:,} {self.unit}: the ops account for "
                         f"{self.total_cost / self.inference_cost * 100:.2f} % ({outside:,} outside the ops: "
                         "input/output copies and the call sequence)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title, "unit": self.unit, "inference_cost": self.inference_cost,
            "total_cost": self.total_cost, "total_macs": self.total_macs,
            "cycles": self.total_estimated_cycles, "ms": self._ms(self.total_estimated_cycles),
            "cycles_are_estimates": self.has_estimate,
            "ops": [{**asdict(r.op), "cost": r.cost, "share": r.share, "cost_per_mac": r.cost_per_mac,
                     "cycles": r.estimated_cycles, "ms": self._ms(r.estimated_cycles)}
                    for r in self.rows],
        }

    def svg(self, width: int = 1000) -> str:
        """A horizontal bar per op, largest first, labelled with its handle, name, kernel and share."""
        bar_h, gap, left, right, top = 18, 6, 330, 150, 56
        height = top + len(self.rows) * (bar_h + gap) + 30
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
        for i, r in enumerate(self.rows):
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
        parts.append("</svg>")
        return "\n".join(parts) + "\n"


def make_profile(title: str, unit: str, ops: list[OpInfo], events: list[TraceEvent],
                 inference_cost: int | None, inference_of: str = "normal build",
                 clock_hz: int | None = None) -> Profile:
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
                   clock_hz=clock_hz)


def events_json(profile: Profile, run: Any) -> dict[str, Any]:
    """What ``mcu profile --events`` saves: the trace with the normal build's whole-inference cost."""
    return {**run.to_json(), "inference_cost": profile.inference_cost, "traced_inference_cost": run.inference_cost,
            "clock_hz": profile.clock_hz}


def out_lines(console: str) -> list[str]:
    """The harness's OUT lines: every output of every bundled vector, as raw words."""
    return [line.strip() for line in console.splitlines() if line.startswith("OUT ")]


def profile_model(cm: Any, timeout_s: float = 600.0, port: str | None = None, drive: Path | None = None,
                  search_dirs: Any = None) -> tuple[Profile, Any]:
    """Trace ``cm``'s firmware on its simulator (or a Pico 2 / Pico over USB: ``port``, ``drive``); the
    profile and the trace run (events, outputs).

    In simulation the normal firmware runs too: its whole-inference count is the figure the ops must add
    up to, and both firmwares must print the same outputs for every bundled vector (the tracer changes no
    result). On hardware the traced firmware checks its outputs against the bundled vectors itself, and
    the total is its own CYCLES line (tracer included).
    """
    run = run_traced(cm, timeout_s=timeout_s, port=port, drive=drive, search_dirs=search_dirs)
    if not run.passed:
        raise McuError(f"the profiling firmware of {cm.spec.name} failed its bundled vectors",
                       hint=run.console.strip()[-1500:])
    ops = op_table(cm.graph, cm.memory, cm.library)
    if cm.board.deploy_method == "uf2":
        title = f"{cm.spec.name} {cm.quantize} on {cm.board.name} (cycles measured on the chip)"
        return make_profile(title, run.unit, ops, run.events, run.inference_cost,
                            "traced build, hooks included"), run
    normal = cm.simulate(timeout_s=timeout_s)
    if out_lines(normal.console) != out_lines(run.console):
        raise McuError(f"the profiling and normal firmwares of {cm.spec.name} print different outputs",
                       hint="the tracer hooks must not change what a model computes: report this as a bug")
    title = f"{cm.spec.name} {cm.quantize} on {cm.board.name}"
    return make_profile(title, run.unit, ops, run.events, normal.instructions, clock_hz=cm.board.clock_hz), run
