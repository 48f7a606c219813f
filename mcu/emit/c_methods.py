"""Render one generated C library for a model with several methods (prefill and decode of a language
model).

Each method is compiled on its own (its graph, its memory plan) and gets its own run function,
``<prefix>_<method>_run``. What they share is defined once by the library: the constants (equal weights
have one symbol, mcu/emit/c_model.py ConstPool), the arenas (each as large as the largest method needs),
and the model state at the start of arena 0 (a KV cache that prefill fills and decode extends; the
planner puts every state buffer at the same offset in every method, checked here). The library header
may carry a tokenizer table (characters of a character-level model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from mcu.emit.c_model import (RUNTIME_SOURCES, ArenaView, ConstPool, GeneratedLibrary, ModelView, StateView,
                              arena_var, build_view, c_identifier, environment)
from mcu.emit.kernels import merge_defines
from mcu.errors import McuError
from mcu.ir import Graph
from mcu.plan.memory import MemoryPlan
from mcu.version import __version__


@dataclass
class MethodInput:
    name: str
    graph: Graph
    memory: MemoryPlan


@dataclass
class LibraryView:
    """What methods.h.j2 / methods.c.j2 read."""

    name: str
    prefix: str
    PREFIX: str
    quantize: str
    version: str
    arenas: list[ArenaView]
    methods: list[ModelView]
    state: list[StateView]
    tokens: list[int] = field(default_factory=list)  # the tokenizer: code point of each token

    @property
    def state_bytes(self) -> int:
        return max((s.offset + s.nbytes for s in self.state), default=0)

    @property
    def arena_size(self) -> int:
        return sum(a.size for a in self.arenas)


def _same_state(views: list[ModelView]) -> list[StateView]:
    first = views[0].state
    for v in views[1:]:
        if [(s.name, s.offset, s.nbytes) for s in v.state] != [(s.name, s.offset, s.nbytes) for s in first]:
            raise McuError(f"methods {views[0].name} and {v.name} place the model state differently",
                           hint="every method must read and write the same state buffers")
    return first


def render_methods_library(name: str, methods: Sequence[MethodInput], quantize: str,
                           tokens: Sequence[int] = ()) -> GeneratedLibrary:

    if not methods:
        raise McuError("a multi-method library needs at least one method")
    prefix = c_identifier(name)
    pool = ConstPool(prefix)
    views = [build_view(m.graph, m.memory, quantize, prefix=f"{prefix}_{c_identifier(m.name)}", pool=pool)
             for m in methods]
    if len({len(v.arenas) for v in views}) != 1:
        raise McuError(f"the methods of {name} use different numbers of arenas",
                       hint="plan every method into the same RAM regions")
    arenas = []
    for i, a in enumerate(views[0].arenas):
        size = max(v.arenas[i].size for v in views)
        arenas.append(ArenaView(var=arena_var(i), symbol=f"{prefix}_{arena_var(i)}", size=size, section=a.section,
                                region=a.region, MACRO=f"{prefix.upper()}_ARENA{i}_SIZE"))
    state = [StateView(s.name, f"{prefix.upper()}_STATE_{s.MACRO.split('_STATE_', 1)[1]}", s.offset, s.nbytes,
                       s.dtype, s.shape) for s in _same_state(views)]
    for v, m in zip(views, methods):
        v.name = m.name
        v.shared_arenas = True
        v.weights_header = f"{prefix}_weights.h"
        v.arenas = [ArenaView(var=a.var, symbol=arenas[i].symbol, size=a.size, section=a.section, region=a.region,
                              MACRO=a.MACRO) for i, a in enumerate(v.arenas)]
        v.state = []  # the library header declares it once
    lib = LibraryView(name=name, prefix=prefix, PREFIX=prefix.upper(), quantize=quantize, version=__version__,
                      arenas=arenas, methods=views, state=state, tokens=list(tokens))
    weights = ModelView(name=name, prefix=prefix, PREFIX=prefix.upper(), quantize=quantize, version=__version__,
                        arena_size=lib.arena_size, lower_bound=0, arenas=arenas, inputs=[], outputs=[],
                        constants=pool.constants, steps=[], kernel_headers=[],
                        delegates=[d for v in views for d in v.delegates])
    env = environment()
    files = {
        f"{prefix}_model.h": env.get_template("methods.h.j2").render(lib=lib),
        f"{prefix}_model.c": env.get_template("methods.c.j2").render(lib=lib),
        f"{prefix}_weights.h": env.get_template("weights.h.j2").render(m=weights),
        f"{prefix}_weights.c": env.get_template("weights.c.j2").render(m=weights),
    }
    sources: list[str] = []
    runtime: list[str] = list(RUNTIME_SOURCES)
    for v in views:
        files[f"{v.prefix}_model.h"] = env.get_template("model.h.j2").render(m=v)
        files[f"{v.prefix}_model.c"] = env.get_template("model.c.j2").render(m=v)
        sources += [s for s in v.kernel_sources if s not in sources]
        runtime += [s for s in v.runtime_sources if s not in runtime]
    weights.kernel_sources = sources
    return GeneratedLibrary(prefix=prefix, files=files, kernel_sources=sources, runtime_sources=runtime,
                            view=weights, include_dirs=sorted({d for v in views for d in v.include_dirs}),
                            libraries=sorted({f for v in views for f in v.libraries}),
                            defines=merge_defines([v.backend_defines for v in views]))
