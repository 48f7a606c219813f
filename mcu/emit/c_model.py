"""Render the generated C library of one model through the Jinja2 templates.

One view-model object (:class:`ModelView`) per model carries everything the
templates read; the templates hold no logic beyond loops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import jinja2
import numpy as np

from mcu.version import __version__
from mcu.emit.cvalues import c_array_body, c_float, c_initializer, c_type
from mcu.emit.delegates import REGISTRY_SOURCE, runtime_for
from mcu.emit.fused import body as fused_body
from mcu.emit.prefix import body as prefix_body
from mcu.emit.kernels import KernelCall, Refs, emit_call, kernel_defines
from mcu.ir import Graph, Op, Tensor
from mcu.plan.fused import KIND as FUSED_KIND
from mcu.plan.prefix import KIND as PREFIX_KIND, streamed_inputs
from mcu.plan.memory import MemoryPlan, scratch_bytes
from mcu.paths import codegen_dir

KERNEL_HEADERS = ["mcu/kernels_f32.h", "mcu/kernels_s8.h", "mcu/kernels_mixed.h", "mcu/kernels_generic.h"]
RUNTIME_SOURCES = ["src/mcu_status.c"]


@dataclass
class IOView:
    kind: str
    KIND: str
    index: int
    name: str
    dtype: str
    c_type: str
    shape: list[int]
    dim_order: list[int]
    physical_shape: list[int]
    numel: int
    nbytes: int
    offset: int
    arena: str
    quant: dict[str, Any] | None = None
    streamed: bool = False  # read a row at a time through the firmware's callback (not in the arena)
    rows: int = 1  # rows of a streamed input (dim 2), each row_numel elements
    row_numel: int = 0
    in_place: bool = False  # the kernels read the caller's buffer when it is aligned (in_place_inputs)


@dataclass
class StateView:
    """A buffer the model keeps between runs, at the start of arena 0."""

    name: str  # the buffer's name in the module
    MACRO: str
    offset: int
    nbytes: int
    dtype: str
    shape: list[int]


@dataclass
class ArenaView:
    var: str  # name inside the generated functions
    symbol: str  # the static array
    size: int
    section: str  # the linker script places this section in ``region``
    region: str
    MACRO: str


@dataclass
class ConstView:
    name: str
    symbol: str
    dtype: str
    c_type: str
    shape: list[int]
    dim_order: list[int]
    numel: int
    body: str


@dataclass
class DelegateView:
    """One delegated partition: its payload (const data), its handle (model-owned) and its backend."""

    index: int
    name: str
    backend: str
    symbol: str  # the C mcu_delegate_backend
    payload_symbol: str
    payload_size: int
    payload_body: str
    ops: list[str]


# Test builds (the firmware harness, mcu debug) define GUARD_DEFINE: then every arena has GUARD_BYTES
# more on each side and the GUARD_BYTES on each side of a custom kernel's output are checked around
# its call (codegen/model.c.j2, read back by mcu/device/guards.py). Library exports never define it.
GUARD_DEFINE = "MCU_GUARD_WRITES"
GUARD_BYTES = 32  # catches the first stray byte of any overrun or underrun; a wild write is the host check's


@dataclass
class GuardView:
    """The arena window a custom kernel must leave alone: GUARD_BYTES before and after its output, minus
    its scratch buffer (offsets from the start of the output's arena)."""

    arena: str  # the arena's C variable
    arena_index: int
    out_lo: int
    out_hi: int
    skip_lo: int = 0
    skip_hi: int = 0


@dataclass
class StepView:
    index: int
    name: str
    call: KernelCall
    params_c: str
    output_ref: str = ""  # the op's first output in the arena (C expression), for the tracer's dump hook
    output_nbytes: int = 0
    guard: GuardView | None = None  # a custom kernel's call (GUARD_DEFINE)
    body: list[str] = field(default_factory=list)  # statements replacing the one call (a fused block's loop)
    traced_inside: bool = False  # the body brackets its own steps with the tracer's hooks (a streamed prefix)


@dataclass
class ModelView:
    name: str
    prefix: str
    PREFIX: str
    quantize: str
    version: str
    arena_size: int
    lower_bound: int
    arenas: list[ArenaView]
    inputs: list[IOView]
    outputs: list[IOView]
    constants: list[ConstView]
    steps: list[StepView]
    kernel_headers: list[str]
    kernel_sources: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    delegates: list[DelegateView] = field(default_factory=list)
    runtime_sources: list[str] = field(default_factory=list)  # relative to runtime_c, beyond RUNTIME_SOURCES
    libraries: list[str] = field(default_factory=list)  # linker flags (a delegate's library)
    state: list[StateView] = field(default_factory=list)  # model state
    # A method of a multi-method library (mcu/emit/c_methods.py): the arenas and the weights belong to
    # the library, which defines them once for all its methods.
    shared_arenas: bool = False
    weights_header: str = ""
    # Compile definitions that specialise the kernels to this model, per backend (Backend.kernel_defines)
    backend_defines: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def kernel_defines(self) -> dict[str, int]:
        return {name: value for d in self.backend_defines.values() for name, value in d.items()}

    @property
    def state_bytes(self) -> int:
        return max((s.offset + s.nbytes for s in self.state), default=0)

    @property
    def guarded(self) -> bool:
        """Whether test builds check the arena around custom kernels (a library's shared arenas: not)."""
        return not self.shared_arenas and any(s.guard is not None for s in self.steps)

    @property
    def guard_bytes(self) -> int:
        return GUARD_BYTES

    @property
    def arena_symbols(self) -> dict[str, str]:
        return {a.var: a.symbol for a in self.arenas}

    @property
    def has_quantized_io(self) -> bool:
        return any(io.quant for io in self.inputs + self.outputs)

    @property
    def in_place_inputs(self) -> list[IOView]:
        return [io for io in self.inputs if io.in_place]

    @property
    def stream_input(self) -> IOView | None:
        """The input read a row at a time through the firmware's callback (``<prefix>_run_streamed``)."""
        return next((io for io in self.inputs if io.streamed), None)


@dataclass
class GeneratedLibrary:
    """The generated files (name -> text) plus what is needed to build them."""

    prefix: str
    files: dict[str, str]
    kernel_sources: list[str]  # runtime_c/kernels file names (mcu.paths.kernel_source); absolute: an external backend's
    runtime_sources: list[str]  # paths relative to runtime_c
    view: ModelView
    include_dirs: list[str] = field(default_factory=list)  # an external backend's headers (CMSIS-NN)
    libraries: list[str] = field(default_factory=list)  # linker flags of delegate libraries (-lXNNPACK)
    # Compile definitions of the kernel sources every build of this library uses (Backend.kernel_defines)
    defines: dict[str, int] = field(default_factory=dict)

    def define_flags(self) -> list[str]:
        """``-DNAME=value`` in a fixed order (build cache keys and command lines)."""
        return [f"-D{k}={v}" for k, v in sorted(self.defines.items())]


def c_identifier(name: str) -> str:
    ident = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    if not ident or ident[0].isdigit():
        ident = "m_" + ident
    return ident.lower()


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(codegen_dir())),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def arena_var(index: int) -> str:
    """The C name of arena ``index`` inside the generated functions."""
    return "arena" if index == 0 else f"arena{index}"


def _io_view(kind: str, index: int, t: Tensor, offset: int, arena: str) -> IOView:
    quant = None
    if t.quant is not None and t.quant.per_tensor:
        quant = {"scale": c_float(t.quant.scale[0]), "inv_scale": c_float(1.0 / t.quant.scale[0]),
                 "zero_point": t.quant.zero_point[0], "suffix": "s16" if t.dtype == "int16" else "s8"}
    return IOView(kind=kind, KIND=kind.upper(), index=index, name=t.name, dtype=t.dtype, c_type=c_type(t.dtype),
                  shape=list(t.shape), dim_order=list(t.dim_order), physical_shape=list(t.physical_shape),
                  numel=t.numel, nbytes=t.nbytes, offset=offset, arena=arena, quant=quant)


def _streamed_view(index: int, t: Tensor) -> IOView:
    view = _io_view("input", index, t, -1, "")
    view.streamed, view.rows = True, t.shape[2]
    view.row_numel = t.numel // t.shape[2]
    return view


@dataclass
class ConstPool:
    """The constants of a library, each defined once: the methods of a multi-method library share
    equal weights (same dtype, shape, order and bytes) through one pool."""

    prefix: str
    constants: list[ConstView] = field(default_factory=list)
    by_content: dict[tuple, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)

    def symbol(self, t: Tensor) -> str:
        assert t.data is not None
        data = np.ascontiguousarray(t.data)
        key = (t.dtype, tuple(t.shape), tuple(t.dim_order), data.tobytes())
        if key not in self.by_content:
            base = f"{self.prefix}_{c_identifier(t.name)}"
            sym, n = base, 1
            while sym in self.used:
                n += 1
                sym = f"{base}_{n}"
            self.used.add(sym)
            self.by_content[key] = sym
            self.constants.append(ConstView(name=t.name, symbol=sym, dtype=t.dtype, c_type=c_type(t.dtype),
                                            shape=list(t.shape), dim_order=list(t.dim_order), numel=t.numel,
                                            body=c_array_body(data)))
        return self.by_content[key]


def in_place_candidates(graph: Graph) -> dict[int, int]:
    """Inputs (id -> index) the kernels could read in the caller's buffer instead of a copy in the arena:
    none of the graph's outputs or state, and read only by ops that each make one kernel call of their own
    (no aliasing view, fused block, streamed prefix or delegate, whose code reads the arena's bytes)."""
    held = {id(t) for t in [*graph.outputs, *graph.state.values()]}
    direct = {id(t): i for i, t in enumerate(graph.inputs) if id(t) not in held and not t.is_constant}
    for op in graph.ops:
        if op.kind in ("delegate", FUSED_KIND, PREFIX_KIND) or op.attrs.get("alias"):
            for t in op.inputs:
                if t is not None:
                    direct.pop(id(t), None)
    return direct


def build_view(graph: Graph, memory: MemoryPlan, quantize: str, prefix: str | None = None,
               pool: ConstPool | None = None, in_place: bool = True) -> ModelView:
    """``prefix`` and ``pool``: a method of a multi-method library (its own C prefix, the library's
    constants). ``in_place``: let the kernels read inputs in the caller's buffer where every reader's
    call names them (a kernel that takes its input as its output's bytes does not: then none is)."""
    prefix = prefix or c_identifier(graph.name)
    pool = pool or ConstPool(prefix)
    symbols: dict[int, str] = {}
    constants = pool.constants

    def const_symbol(t: Tensor) -> str:
        if id(t) not in symbols:
            symbols[id(t)] = pool.symbol(t)
        return symbols[id(t)]

    streamed = streamed_inputs(graph)
    direct = {} if not in_place or streamed else in_place_candidates(graph)

    def tensor_ref(t: Tensor) -> str:
        if t.is_constant:
            return const_symbol(t)
        if id(t) in direct:
            return f"({c_type(t.dtype)} *)in{direct[id(t)]}"
        return f"({c_type(t.dtype)} *)({arena_var(memory.arena_index(t))} + {memory.offset(t)})"

    steps: list[StepView] = []
    sources: list[str] = []
    headers = list(KERNEL_HEADERS)
    include_dirs: list[str] = []
    delegates: list[DelegateView] = []
    runtime_sources: list[str] = []
    libraries: list[str] = []
    emitted: list[tuple[Op, KernelCall]] = []
    for i, op in enumerate(graph.ops):
        if op.kind == "delegate":
            call, view = _delegate_call(op, len(delegates), prefix, tensor_ref)
            delegates.append(view)
            rt = runtime_for(view.backend, op.name)
            headers += [h for h in ("mcu/delegate.h", rt.header) if h not in headers]
            runtime_sources += [s for s in (REGISTRY_SOURCE, *rt.sources) if s not in runtime_sources]
            libraries += [f for f in rt.libraries if f not in libraries]
            steps.append(StepView(index=i, name=op.name, call=call, params_c=""))
            continue
        scratch = memory.scratch_offsets.get(id(op))
        where = None if scratch is None else arena_var(memory.scratch_arena_index(op))
        if op.kind in (FUSED_KIND, PREFIX_KIND):
            lines, row_calls = fused_body(op, tensor_ref, f"{where} + {scratch}") if op.kind == FUSED_KIND \
                else prefix_body(op, tensor_ref, f"{where} + {scratch}", i)
            for row_op, row_call in row_calls:
                emitted.append((row_op, row_call))
                sources += [s for s in row_call.sources if s not in sources]
                headers += [h for h in row_call.headers if h not in headers]
                include_dirs += [d for d in row_call.include_dirs if d not in include_dirs]
            comment = f"{op.name}: inverted-residual block fused row by row ({', '.join(op.attrs['ops'])})" \
                if op.kind == FUSED_KIND else \
                f"{op.name}: streamed prefix, {op.attrs['prefix'].calls} band calls through rings " \
                f"({', '.join(op.attrs['ops'])})"
            kernels = "+".join(dict.fromkeys(c.function or c.backend_function for _, c in row_calls))
            steps.append(StepView(index=i, name=op.name, call=KernelCall(kernels, [], [], comment=comment), params_c="",
                                  output_ref=tensor_ref(op.output), output_nbytes=op.output.nbytes, body=lines,
                                  traced_inside=op.kind == PREFIX_KIND))
            continue
        ref = Refs(tensor_ref, None if scratch is None else (f"{where} + {scratch}", scratch_bytes(op)))
        call = emit_call(op, ref)
        if call is None:
            continue
        if any(t is not None and id(t) in direct and tensor_ref(t) not in call.args for t in op.inputs):
            return build_view(graph, memory, quantize, prefix, pool, in_place=False)
        emitted.append((op, call))
        for s in call.sources:
            if s not in sources:
                sources.append(s)
        headers += [h for h in call.headers if h not in headers]
        include_dirs += [d for d in call.include_dirs if d not in include_dirs]
        params_c = c_initializer(call.params) if call.params is not None else ""
        out = op.outputs[0]
        guard = None
        if op.kind == "custom" and not out.is_constant:
            k = memory.arena_index(out)
            lo = memory.offset(out)
            skip = (scratch, scratch + scratch_bytes(op)) if scratch is not None and \
                memory.scratch_arena_index(op) == k else (0, 0)
            guard = GuardView(arena_var(k), k, lo, lo + out.nbytes, *skip)
        steps.append(StepView(index=i, name=op.name, call=call, params_c=params_c,
                              output_ref="" if out.is_constant else tensor_ref(out), output_nbytes=out.nbytes,
                              guard=guard))

    inputs = [_streamed_view(i, t) if id(t) in streamed else
              _io_view("input", i, t, memory.offset(t), arena_var(memory.arena_index(t)))
              for i, t in enumerate(graph.inputs)]
    for io, t in zip(inputs, graph.inputs):
        io.in_place = id(t) in direct
    outputs = [_io_view("output", i, t, memory.offset(t), arena_var(memory.arena_index(t)))
               for i, t in enumerate(graph.outputs)]
    if len(graph.output_names) == len(outputs):
        for io, label in zip(outputs, graph.output_names):
            io.name = label
    arenas = [ArenaView(var=arena_var(i), symbol=f"{prefix}_{arena_var(i)}", size=a.plan.arena_size,
                        section=".mcu_arena" if i == 0 else f".mcu_arena_{a.region}", region=a.region,
                        MACRO=f"{prefix.upper()}_ARENA{i}_SIZE")
              for i, a in enumerate(memory.arenas)]
    # The _run_f32 wrapper converts at the boundary with these two kernels.
    for needed, pattern in ((inputs, "mcu_quantize_f32_{}.c"), (outputs, "mcu_dequantize_{}_f32.c")):
        for source in dict.fromkeys(pattern.format(io.quant["suffix"]) for io in needed if io.quant):
            if source not in sources:
                sources.append(source)
    return ModelView(
        name=graph.name, prefix=prefix, PREFIX=prefix.upper(), quantize=quantize, version=__version__,
        arena_size=memory.arena_size, lower_bound=memory.lower_bound, arenas=arenas,
        inputs=inputs, outputs=outputs,
        constants=constants, steps=steps, kernel_headers=headers, kernel_sources=sources,
        include_dirs=include_dirs, delegates=delegates, runtime_sources=runtime_sources, libraries=libraries,
        state=[StateView(name, f"{prefix.upper()}_STATE_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}",
                         memory.offset(t), t.nbytes, t.dtype, list(t.shape))
               for name, t in sorted(graph.state.items())],
        backend_defines=kernel_defines(emitted),
    )


def _delegate_call(op: Op, k: int, prefix: str, tensor_ref: Callable[[Tensor], str]) -> tuple[KernelCall, DelegateView]:
    """A delegate op: its payload becomes const data, the call executes the handle made at init."""
    payload = bytes(op.attrs["payload"])
    view = DelegateView(index=k, name=op.name, backend=str(op.attrs["backend"]),
                        symbol=runtime_for(str(op.attrs["backend"]), op.name).symbol,
                        payload_symbol=f"{prefix}_delegate{k}_payload", payload_size=len(payload),
                        payload_body=c_array_body(np.frombuffer(payload, dtype=np.uint8), per_line=24),
                        ops=list(op.attrs.get("ops", [])))
    boundary = [*op.inputs, *op.outputs]
    tensors = ", ".join(f"(void *){tensor_ref(t)}" for t in boundary)
    sizes = ", ".join(str(t.nbytes) for t in boundary)
    call = KernelCall(
        function="mcu_delegate_execute",
        args=[f"&{view.symbol}", f"{prefix}_delegate_handles[{k}]", "tensors", "tensor_bytes",
              str(len(op.inputs)), str(len(op.outputs))],
        sources=[],
        comment=f"{op.name}: {view.backend} partition of {len(view.ops)} ops ({', '.join(view.ops)})",
        locals=[f"void *const tensors[{len(boundary)}] = {{{tensors}}};",
                f"static const uint32_t tensor_bytes[{len(boundary)}] = {{{sizes}}};"],
    )
    return call, view


def render_library(graph: Graph, memory: MemoryPlan, quantize: str) -> GeneratedLibrary:
    view = build_view(graph, memory, quantize)
    env = environment()
    p = view.prefix
    files = {
        f"{p}_model.h": env.get_template("model.h.j2").render(m=view),
        f"{p}_model.c": env.get_template("model.c.j2").render(m=view),
        f"{p}_weights.h": env.get_template("weights.h.j2").render(m=view),
        f"{p}_weights.c": env.get_template("weights.c.j2").render(m=view),
    }
    return GeneratedLibrary(prefix=p, files=files, kernel_sources=view.kernel_sources,
                            runtime_sources=[*RUNTIME_SOURCES, *view.runtime_sources], view=view,
                            include_dirs=list(view.include_dirs), libraries=list(view.libraries),
                            defines=dict(view.kernel_defines))


@dataclass
class VectorData:
    index: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]


@dataclass
class FirmwareView:
    vectors: list[VectorData]
    exact: bool
    rule: str
    tolerances: list[str]


def render_firmware_main(lib: GeneratedLibrary, vectors_in: list[list[np.ndarray]],
                         vectors_out: list[list[np.ndarray]], tolerances: list[float] | None) -> str:
    """The firmware harness. Arrays are already in the model's memory layout and dtype."""
    fw = firmware_view(lib, vectors_in, vectors_out, tolerances)
    return environment().get_template("firmware_main.c.j2").render(m=lib.view, f=fw)


def firmware_view(lib: GeneratedLibrary, vectors_in: list[list[np.ndarray]],
                  vectors_out: list[list[np.ndarray]], tolerances: list[float] | None) -> FirmwareView:
    """The bundled vectors and the comparison rule, for the firmware harness and the exported examples."""
    view = lib.view
    vectors = []
    for vi, (xs, ys) in enumerate(zip(vectors_in, vectors_out)):
        vectors.append(VectorData(
            index=vi,
            inputs=[{"index": i, "c_type": view.inputs[i].c_type, "numel": int(x.size), "body": c_array_body(x)}
                    for i, x in enumerate(xs)],
            outputs=[{"index": i, "c_type": view.outputs[i].c_type, "numel": int(y.size), "body": c_array_body(y)}
                     for i, y in enumerate(ys)],
        ))
    exact = tolerances is None
    fw = FirmwareView(
        vectors=vectors, exact=exact,
        rule="bit-exact" if exact else "largest absolute difference within the stated tolerance",
        tolerances=[] if exact else [c_float(t) for t in tolerances],
    )
    return fw
