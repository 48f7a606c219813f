"""The ATen ops that run as fp32 islands in int8 models: no int8 kernel, so the
quantizer leaves them unannotated (or the lowering keeps them float) and the int8 model runs them in
fp32 between a dequantize and a quantize, as the partition report names them.

tests/kernels/test_islands_s8.py quantizes a small model with every ATen op the frontend lowers and checks that
exactly these are islands, so this list cannot drift from what a build does; ``mcu ops`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ATen overload (mcu.capture.edge.op_name) -> why it has no int8 form
ISLANDS: dict[str, str] = {
    "aten.native_group_norm.default": "no TFLite integer semantics",
    "aten._native_batch_norm_legit.no_stats": "instance norm: no TFLite integer semantics",
    "aten.var.correction": "no TFLite integer semantics",
    "aten._native_batch_norm_legit_no_training.default": "a batch norm that does not follow a convolution "
                                                         "(where it folds) has no int8 kernel",
}


def fallback_kind(op: str) -> str:
    """The op kind of a ``graph.fallbacks`` entry (``"<kind> <name> (<source>)"``)."""
    return op.split(" ", 1)[0]


def island_ops(graph: Any) -> list[int]:
    """Debug handles of the ops an int8 graph runs for its fp32 islands: the float ops, the dequantize
    into them and the quantize out of them."""
    return [i for i, op in enumerate(graph.ops)
            if op.output.dtype == "float32" or op.kind == "quantize"]


@dataclass(frozen=True)
class IslandSummary:
    """The fp32 islands of an int8 model in one line: how many ops, per op kind how many and why, and,
    when the program was profiled, the share of its instructions spent in them."""

    count: int
    ops: dict[str, tuple[int, str]]  # kind -> (count, reasons joined by "; ")
    instruction_share: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "ops": {k: {"count": n, "reason": why} for k, (n, why) in self.ops.items()},
                "instruction_share": self.instruction_share}

    def line(self) -> str:
        parts = "; ".join(f"{k} x{n}: {why}" for k, (n, why) in self.ops.items())
        share = "" if self.instruction_share is None else f", {100.0 * self.instruction_share:.1f}% of instructions"
        return f"fp32 islands: {self.count} op{'s' if self.count != 1 else ''} ({parts}){share}"


def summarize(fallbacks: list[tuple[str, str]], graph: Any = None,
              costs: dict[int, int] | None = None) -> IslandSummary:
    """The summary of ``fallbacks`` (``graph.fallbacks``); with ``costs`` (instructions per debug handle, a
    profile of ``graph``) the share of the program's instructions spent on the islands' ops."""
    per_kind: dict[str, tuple[int, list[str]]] = {}
    for op, why in fallbacks:
        n, reasons = per_kind.get(fallback_kind(op), (0, []))
        per_kind[fallback_kind(op)] = (n + 1, reasons if why in reasons else [*reasons, why])
    share = None
    if costs and graph is not None:
        total = sum(costs.values())
        share = sum(costs.get(h, 0) for h in island_ops(graph)) / total if total else 0.0
    ordered = sorted(per_kind.items(), key=lambda kv: -kv[1][0])
    return IslandSummary(len(fallbacks), {k: (n, "; ".join(r)) for k, (n, r) in ordered}, share)
