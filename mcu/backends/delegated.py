"""Backend wrappers for experiments with partitioning (bench/backends.py)."""

from __future__ import annotations

from mcu.backends.base import Backend, Context
from mcu.ir import Op


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
