"""The compile record: what later tools need to explain the device, saved at compile time.

A record is one zip file (as ExecuTorch's ETRecord keeps graph and debug metadata beside the program):

- ``record.json``: the model, board and quantization; the op table (:class:`mcu.devtools.ops.OpInfo`, one
  entry per op the device runs, keyed by debug handle: FX node name, kind, kernel, backend, shapes, MACs,
  source line, bytes live, output quantization); the whole lowered graph (every op with its inputs and
  outputs: names, shapes, dtypes, dim orders, quantization parameters, whether constant; its scalar
  attributes such as requantization multipliers, shifts and offsets); the memory plan (every arena's
  buffers with sizes, lifetimes and offsets); and, when the firmware was built, the size report.
- ``exported_program.pt2``: the model as ``torch.export`` captured it, in torch.export's own save format
  (``torch.export.load`` reads it back). It is the float program the user wrote, before mcu's
  quantization and lowering, which the lowered graph above describes.

Loading a record needs neither the model file nor a compile: :func:`load_record`, then
:func:`profile_from_record` with a saved trace redraws ``mcu profile``'s table.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcu.devtools.ops import OpInfo, op_table
from mcu.devtools.profile import Profile, make_profile
from mcu.devtools.trace import TraceEvent
from mcu.errors import McuError
from mcu.ir import Graph, Op, QuantParams, Tensor
from mcu.plan.memory import MemoryPlan

RECORD_VERSION = 1
_JSON = "record.json"
_PROGRAM = "exported_program.pt2"


def _quant(q: QuantParams | None) -> dict[str, Any] | None:
    if q is None:
        return None
    return {"scale": [float(s) for s in q.scale], "zero_point": [int(z) for z in q.zero_point], "axis": q.axis,
            "qmin": q.qmin, "qmax": q.qmax}


def _tensor(t: Tensor) -> dict[str, Any]:
    return {"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "dim_order": list(t.dim_order),
            "constant": t.is_constant, "alias_of": t.alias_of.name if t.alias_of is not None else None,
            "quant": _quant(t.quant)}


def _scalar(v: Any) -> bool:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return True
    return isinstance(v, (tuple, list)) and all(_scalar(x) for x in v)


def _op(handle: int, op: Op) -> dict[str, Any]:
    return {"handle": handle, "name": op.name, "kind": op.kind, "source": op.source.strip().removeprefix("at "),
            "inputs": [_tensor(t) for t in op.inputs], "outputs": [_tensor(t) for t in op.outputs],
            "attrs": {k: (list(v) if isinstance(v, tuple) else v) for k, v in op.attrs.items() if _scalar(v)}}


def _memory(memory: MemoryPlan) -> dict[str, Any]:
    return {"arena_bytes": memory.arena_size, "lower_bound_bytes": memory.lower_bound,
            "live_set_bytes": memory.live_set, "arenas": [
        {"region": a.region, "size": a.plan.arena_size, "method": a.plan.method,
         "buffers": [{"name": b.name, "size": b.size, "first_use": b.first_use, "last_use": b.last_use,
                      "offset": off} for b, off in zip(a.plan.buffers, a.plan.offsets)]}
        for a in memory.arenas]}


def record_dict(cm: Any, firmware: Any = None) -> dict[str, Any]:
    graph: Graph = cm.graph
    sizes = None
    if firmware is not None:
        sizes = {"flash_bytes": firmware.flash_bytes, "ram_bytes": firmware.ram_bytes,
                 "sections": dict(firmware.sections),
                 "breakdown": firmware.sizes.as_dict() if firmware.sizes is not None else None}
    return {
        "version": RECORD_VERSION, "model": cm.spec.name, "board": cm.board.name, "quantize": cm.quantize,
        "prefix": cm.library.prefix,
        "inputs": [_tensor(t) for t in graph.inputs], "outputs": [_tensor(t) for t in graph.outputs],
        "ops": [o.to_json() for o in op_table(graph, cm.memory, cm.library)],
        "graph": [_op(i, op) for i, op in enumerate(graph.ops)],
        "memory": _memory(cm.memory), "sizes": sizes,
        "fp32_fallbacks": [{"op": op, "reason": why} for op, why in graph.fallbacks],
    }


def write_record(cm: Any, path: str | Path, firmware: Any = None) -> Path:
    """Save ``cm``'s compile record (and its exported program) to ``path``; ``firmware``: its build, for sizes."""
    # lazy: keeps torch out of this module's import
    import torch

    # lazy: keeps torch out of this module's import
    from mcu.capture.export import capture

    path = Path(path)
    buf = io.BytesIO()
    torch.export.save(capture(cm.spec.model, cm.spec.example_inputs), buf)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(_JSON, json.dumps(record_dict(cm, firmware), indent=1))
        z.writestr(_PROGRAM, buf.getvalue())
    return path


@dataclass
class CompileRecord:
    data: dict[str, Any]
    path: Path

    @property
    def ops(self) -> list[OpInfo]:
        return [OpInfo.from_json(o) for o in self.data["ops"]]

    @property
    def title(self) -> str:
        return f"{self.data['model']} {self.data['quantize']} on {self.data['board']}"

    def exported_program(self) -> Any:
        """The model as torch.export captured it (torch.export.ExportedProgram)."""
        # lazy: keeps torch out of this module's import
        import torch

        with zipfile.ZipFile(self.path) as z:
            return torch.export.load(io.BytesIO(z.read(_PROGRAM)))


def load_record(path: str | Path) -> CompileRecord:
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as z:
            data = json.loads(z.read(_JSON))
    except FileNotFoundError:
        raise McuError(f"compile record {path} does not exist", hint="write one with `mcu build --record FILE`")
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as exc:
        raise McuError(f"{path} is not an mcu compile record ({exc})",
                       hint="write one with `mcu build --record FILE`") from None
    if data.get("version") != RECORD_VERSION:
        raise McuError(f"compile record {path} has version {data.get('version')}, this mcu reads {RECORD_VERSION}",
                       hint="rebuild it with this mcu's `mcu build --record`")
    return CompileRecord(data=data, path=path)


def profile_from_record(record: CompileRecord, trace: dict[str, Any]) -> Profile:
    """``mcu profile``'s table from a record and the events it saved (``mcu profile --events``)."""
    events = [TraceEvent(**e) for e in trace["events"]]
    return make_profile(record.title, trace["unit"], record.ops, events, trace.get("inference_cost"),
                        clock_hz=trace.get("clock_hz"), predicted_on=trace.get("predicted_on"))


def describe_record(record: CompileRecord) -> str:
    """``mcu record show``: the record as a table, one row per op the device runs, then memory and sizes."""
    d = record.data
    lines = [f"{record.title}: {len(d['ops'])} ops; inputs "
             + ", ".join(f"{t['name']} {t['dtype']} {t['shape']}" for t in d["inputs"]) + "; outputs "
             + ", ".join(f"{t['name']} {t['dtype']} {t['shape']}" for t in d["outputs"]),
             f"{'handle':>6}  {'op':<22} {'kernel':<34} {'output':<18} {'MACs':>10} {'live B':>8}  source"]
    for op in record.ops:
        shape = "x".join(map(str, op.output_shapes[0])) if op.output_shapes else "-"
        lines.append(f"{op.handle:>6}  {op.name[:22]:<22} {op.kernel[:34]:<34} {shape[:18]:<18} {op.macs:>10} "
                     f"{op.live_bytes:>8}  {op.source}".rstrip())
    memory = d["memory"]
    lines.append(f"arena {memory['arena_bytes']} B (lower bound {memory['lower_bound_bytes']} B) in "
                 + ", ".join(f"{a['region']} {a['size']} B ({len(a['buffers'])} buffers)" for a in memory["arenas"]))
    if d.get("sizes"):
        lines.append(f"flash {d['sizes']['flash_bytes']} B, static RAM {d['sizes']['ram_bytes']} B")
    for fb in d.get("fp32_fallbacks", []):
        lines.append(f"fp32 fallback: {fb['op']}: {fb['reason']}")
    return "\n".join(lines)
