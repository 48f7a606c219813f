"""Compile a model with a backend preference order that includes delegates (XNNPACK).

Until the pipeline takes ``backend=`` (issue 12 part A), this is the one place that runs
:func:`mcu.backends.base.partition` between lowering and the memory plan; tests, the Linux runner
and bench/backends.py go through it.
"""

from __future__ import annotations

from mcu.api import CompiledModel, resolve_quantize
from mcu.backends.base import Backend, Context, PartitionReport, partition
from mcu.boards import Board, load_board
from mcu.emit.c_model import render_library
from mcu.ir import Op
from mcu.loader import ModelSpec
from mcu.memory import plan_memory
from mcu.pipeline import check_fits, to_graph


class KernelLibrary(Backend):
    """Our own kernels taking every op: the last backend of a preference order. The emitter picks the
    kernel as it always has (attrs["backend"] = "portable" changes nothing)."""

    id = "portable"

    def refuse(self, op: Op, ctx: Context) -> str | None:
        return None


class Refusing(Backend):
    """Wraps a backend and refuses the named ops too: forced graph breaks, to measure what they cost."""

    def __init__(self, inner: Backend, refused: set[str]) -> None:
        self.inner = inner
        self.refused = refused
        self.id = inner.id  # type: ignore[misc]
        self.version = inner.version  # type: ignore[misc]
        self.delegate = inner.delegate  # type: ignore[misc]

    def refuse(self, op: Op, ctx: Context) -> str | None:
        return "graph break forced by the caller" if op.name in self.refused else self.inner.refuse(op, ctx)

    def preprocess(self, partition_: object, ctx: Context) -> bytes:
        return self.inner.preprocess(partition_, ctx)  # type: ignore[arg-type]


def compile_partitioned(spec: ModelSpec, board: str | Board, quantize: str,
                        backends: list[Backend]) -> tuple[CompiledModel, PartitionReport]:
    board_obj = board if isinstance(board, Board) else load_board(board)
    quantize = resolve_quantize(spec, quantize)
    graph = to_graph(spec, quantize)
    report = partition(graph, backends, Context(board_obj, quantize))
    memory = plan_memory(graph, capacities=board_obj.arena_regions())
    check_fits(board_obj, memory)
    library = render_library(graph, memory, quantize)
    return CompiledModel(spec=spec, board=board_obj, quantize=quantize, graph=graph, memory=memory,
                         library=library), report
