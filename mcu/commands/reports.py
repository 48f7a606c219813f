"""The reports ``mcu build`` and ``mcu run`` print: the keys of their JSON objects and their text lines."""

from __future__ import annotations

from typing import Any

import numpy as np

from mcu.backends.base import PartitionReport
from mcu.passes.quantized.fp32_islands import IslandSummary, summarize as summarize_islands
from mcu.quantize import modes


def print_partitions(report: PartitionReport) -> None:
    """A compact table: per backend the ops it took and its partitions, the graph breaks, then the
    refusals grouped by backend and reason (with the first ops they hit)."""
    taken: dict[str, list[int]] = {}
    for backend, ops in report.partitions:
        row = taken.setdefault(backend, [0, 0])
        row[0] += len(ops)
        row[1] += 1
    print(f"{'backend':<10} {'ops':>5} {'partitions':>10}   graph breaks: {report.graph_breaks}")
    for backend, (n, parts) in taken.items():
        print(f"{backend:<10} {n:>5} {parts:>10}")
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in report.refusals:
        grouped.setdefault((r.backend, r.why), []).append(r.op)
    for (backend, why), ops in grouped.items():
        names = "" if ops == ["*"] else f" ({len(ops)} ops: {', '.join(ops[:3])}{', ...' if len(ops) > 3 else ''})"
        print(f"  {backend} refused{names}: {why}")
    for backend, text in report.notes:
        print(f"  {backend}: {text}")
    if report.precision is not None:
        print("\n".join(report.precision.lines()))


def base_report(cm, fw) -> dict[str, Any]:
    """The keys every build and run report has; ``fw`` None (Linux boards): no firmware image, sizes null."""
    return {
        "model": cm.spec.name,
        "board": cm.board.name,
        "quantize": cm.quantize,
        "flash_bytes": fw.flash_bytes if fw is not None else None,
        "ram_bytes": fw.ram_bytes if fw is not None else None,
        "arena_bytes": cm.memory.arena_size,
        "arena_lower_bound_bytes": cm.memory.lower_bound,
        "stack_bytes": fw.stack.reserved_bytes if fw is not None and fw.stack is not None else None,
        "arena_live_set_bytes": cm.memory.live_set,
        "fp32_fallbacks": [{"op": op, "reason": why} for op, why in cm.graph.fallbacks],
        "fp32_islands": summarize_islands(cm.graph.fallbacks).to_json(),
        "partitions": cm.partitions.to_json(),
        "delegated": cm.delegated,
        "elf": str(fw.elf) if fw is not None else None,
        # --weights-in, and the bytes of constant tensors each faster memory took (mcu/device/placement.py)
        "weights_in": cm.weights_placement,
        "weights_placed": dict(getattr(fw, "weights_placed", {}) or {}),
        "notes": list(cm.notes),  # an option that changed nothing (mcu.commands.common.say_notes)
    }


def run_fields(cm: Any, simulator: str, passed: bool, exit_code: int, outputs: list[list[np.ndarray]],
                outputs_raw: list[list[np.ndarray]], eager_error: float, expected_error: float,
                instructions: int | None) -> dict[str, Any]:
    """`mcu run --json` on every board (README, "mcu run --json"): ``outputs`` real values in logical shape
    (int8 dequantized), ``outputs_raw`` as the device wrote them (int8 codes), one list per test vector with
    one entry per model output."""
    return {
        "simulator": simulator,
        "passed": passed,
        "output_names": [io.name for io in cm.library.view.outputs],
        "exit_code": exit_code,
        "instructions": instructions,
        "outputs": [[_nested(o) for o in row] for row in outputs],
        "outputs_raw": [[o.tolist() for o in row] for row in outputs_raw],
        "max_abs_error_vs_eager": eager_error,
        "max_error_vs_expected": expected_error,
        "same_top1": all(int(np.argmax(r)) == int(np.argmax(e))
                         for row, exp in zip(outputs_raw, cm.expected_outputs)
                         for r, e in zip(row, cm.raw_outputs(exp))),
    }


def _nested(arr: np.ndarray) -> Any:
    return arr.astype(np.float64).tolist()


def print_sizes(report: dict[str, Any]) -> None:
    print(f"flash: {report['flash_bytes']} B   static RAM: {report['ram_bytes']} B   "
          f"arena: {report['arena_bytes']} B (lower bound {report['arena_lower_bound_bytes']} B; "
          f"largest live set {report['arena_live_set_bytes']} B before in-place overlaps)"
          + (f"   stack: {report['stack_bytes']} B" if report.get("stack_bytes") else ""))
    if report.get("weights_in") == "fast":
        placed = ", ".join(f"{n} {b} B" for n, b in report.get("weights_placed", {}).items() if b) or "none (no faster memory with room)"
        print(f"weights in fast memory: {placed}")
    if report["fp32_fallbacks"]:
        islands = report["fp32_islands"]
        print(IslandSummary(islands["count"], {k: (v["count"], v["reason"]) for k, v in islands["ops"].items()},
                            islands["instruction_share"]).line())


def model_label(cm: Any) -> str:
    """``int8``, or ``int8, N fp32 islands`` where the int8 program keeps ops in fp32."""
    n = len(cm.graph.fallbacks)
    return f"{cm.quantize}, {n} fp32 island{'s' if n != 1 else ''}" if n and not modes.is_float(cm.quantize) else cm.quantize


def print_predicted_class(outputs: list[list[np.ndarray]]) -> None:
    """The class test vector 0 predicts, when the model looks like a classifier (see :func:`class_scores`)."""
    scores = class_scores(outputs[0]) if outputs else None
    if scores is not None:
        print(f"predicted class: {int(np.argmax(scores))} (test vector 0)")


def class_scores(outputs: list[np.ndarray]) -> np.ndarray | None:
    """The first output when the model looks like a classifier: one output of logical shape (C,) or (1, C)
    with 2 <= C <= 1000 (scores per class); a regression output ((1, 1), a sequence (1, T, F)) is not."""
    if len(outputs) != 1:
        return None
    shape = tuple(outputs[0].shape)
    scores = shape[-1] if len(shape) == 1 or (len(shape) == 2 and shape[0] == 1) else 0
    return outputs[0].reshape(-1) if 2 <= scores <= 1000 else None
