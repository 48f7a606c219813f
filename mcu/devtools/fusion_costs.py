"""The instructions of every op of a model in each schedule the RAM budget chooses from, measured on the
board's simulator (mcu/plan/fusion.py's :class:`FusionCosts`).

An op's count does not depend on which other blocks fuse (each kernel call sees only its own tensors), so
one profile of the whole-tensor schedule and one of every block fused at each band give the count of
every schedule the chooser builds from them. The profiles take a minute or two, so the costs are kept
in the cache, keyed by the generated C of the whole-tensor schedule, the board and the kernels' sources.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from mcu.devtools.profile import profile_model
from mcu.paths import all_kernel_sources, cache_dir
from mcu.plan.fused import KIND as FUSED_KIND
from mcu.plan.fusion import FusionCosts, choose

BANDS = (1, 2, 4, 8)


def _op_costs(cm: Any) -> dict[str, int]:
    profile, _ = profile_model(cm)
    return {row.op.name: row.cost for row in profile.rows}


def _key(cm: Any, bands: tuple[int, ...]) -> str:
    h = hashlib.sha256(f"{cm.board.name}\0{cm.quantize}\0{bands}".encode())
    for name in sorted(cm.library.files):
        h.update(name.encode() + b"\0" + cm.library.files[name].encode() + b"\0")
    for path in all_kernel_sources():
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def measure_fusion_costs(compile_for: Callable[..., Any], bands: tuple[int, ...] = BANDS,
                         budget: int | None = None) -> FusionCosts | None:
    """``compile_for(fuse_blocks=..., fuse_band=...)``: the model compiled for the board in question
    (fuse_blocks "off" for the whole-tensor schedule, "all" for every block fused at the band). A
    ``budget`` below every arena the blocks reach fails here, before anything is measured. None when the
    board has no simulator."""
    whole = compile_for(fuse_blocks="off", fuse_band=1)
    if budget is not None:
        choose(whole.graph, budget)
    if whole.board.qemu_machine is None:  # a board without a simulator: the budget fuses as few blocks as fit
        return None
    path = cache_dir() / "fusion-costs" / f"{_key(whole, bands)}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        return FusionCosts(data["ops"], {(name, band): cost for name, band, cost in data["fused"]})
    ops = _op_costs(whole)
    fused: dict[tuple[str, int], int] = {}
    for band in bands:
        cm = compile_for(fuse_blocks="all", fuse_band=band)
        firsts = {op.name: op.attrs["stages"][0].name for op in cm.graph.ops if op.kind == FUSED_KIND}
        for name, cost in _op_costs(cm).items():
            if name in firsts:
                fused[(firsts[name], band)] = cost
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"ops": ops, "fused": [[n, b, c] for (n, b), c in sorted(fused.items())]}))
    tmp.replace(path)
    return FusionCosts(ops, fused)
