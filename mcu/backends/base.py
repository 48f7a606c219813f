"""The one interface every backend joins through: support tables as data, partitions, payloads.

A backend is one of two kinds, both behind :class:`Backend`:

* a *kernel library* (``delegate = False``): portable, optimized (per-core variants, packed
  weights), CMSIS-NN. Each op it takes becomes one call in the generated C (and one instruction in
  a program file) through :meth:`Backend.emit`; its "partition" is the op itself, so nothing is
  paid at run time for the interface. This is how ExecuTorch's kernel libraries and TFLite Micro's
  optimized kernel overrides work.
* a *delegate* (``delegate = True``): XNNPACK on desktop and phone CPUs, an NPU. The partitioner
  merges the ops it takes into the largest legal partitions (convex runs of the execution order)
  and :meth:`Backend.preprocess` turns each into payload bytes. In the graph a partition is one
  ``Op(kind="delegate")`` whose inputs and outputs are the partition's boundary tensors and whose
  attrs are ``{"backend": id, "version": int, "payload": bytes, "ops": [names]}``. The C side runs
  it through the delegate registry (runtime_c/include/mcu/delegate.h): ``init(payload, arena) ->
  handle``, ``execute(handle, tensors)``, ``destroy(handle)``, the same for program files and for
  generated code.

Written contract of :meth:`Backend.preprocess`: it reads only the partition (ops, their attrs,
constant tensors, boundary tensors' shapes, dtypes, dim orders and quantization) and the
:class:`Context`; it returns bytes that start with the backend's 4-byte magic and a little-endian
u32 version, so that the C ``init`` refuses a payload for another backend or version with a status
code; it never mutates the graph; equal partitions give equal bytes (deterministic).

Support is declared as data (:class:`Rule`): op kind, activation dtypes, weight quantization
scheme, and named constraints whose ``why`` is what the partition report prints for a refused op.

A backend owns its options (a dataclass its package declares: CMSIS-NN's source tree, the optimized
kernels' weight layout) and the C it adds to a build: a delegate its runtime (:class:`DelegateRuntime`),
a kernel library the compile definitions that specialise its kernels to a model
(:meth:`Backend.kernel_defines`). The build's options reach the backends as one
:data:`BackendOptions` mapping that the pipeline passes through unread; the emitter asks the
registry for a backend's C, so neither names a particular backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from mcu.ir import Graph, Op, PrecisionChoice, Tensor
from mcu.errors import McuError

if TYPE_CHECKING:  # pragma: no cover
    from mcu.backends.calls import KernelCall
    from mcu.device.boards import Board


# A build's backend options: backend id -> that backend's options (the dataclass its package declares,
# e.g. mcu/backends/cmsis_nn/options.py). A backend without an entry runs with its defaults.
BackendOptions = dict[str, Any]


@dataclass(frozen=True)
class Constraint:
    """A condition on an op beyond kind and dtype; ``why`` says what fails when it does not hold."""

    why: str
    holds: Callable[[Op], bool]


@dataclass(frozen=True)
class Rule:
    """One row of a backend's support table."""

    kind: str  # IR op kind
    dtypes: tuple[str, ...]  # activation dtypes the row takes ("float32", "int8")
    # weights' quantization: "per-tensor", "per-channel", or "any" (ops without weights: "any")
    quant: str = "any"
    constraints: tuple[Constraint, ...] = ()


# op.attrs key: the op's "scratch_bytes" only make its kernel faster (it runs without them), so that a
# build that must save RAM (a RAM budget, streamed rows, fused blocks, a board it does not fit) drops them.
SPEED_SCRATCH = "speed_scratch"


@dataclass
class Context:
    """What a backend may look at besides the op: the board and the build's options."""

    board: Board
    quantize: str = "none"
    options: BackendOptions = field(default_factory=dict)
    # The model's constants sit in memory with data wait states (mcu/device/placement.py, weights_wait): the
    # board's read-only memory waits and --weights-in does not move them to a faster one. Kernels whose best
    # layout depends on it (the optimized backend's packed streams) read it.
    weights_wait: bool = False
    # Bytes of the cache their reads go through where they wait (placement.py, weights_cache_bytes; 0: none):
    # whether a stream read by parts keeps each part cached between its readers.
    weights_cache: int = 0


@dataclass(frozen=True)
class DelegateRuntime:
    """The C side of a delegate backend: what generated code names, includes, compiles and links."""

    symbol: str  # the const mcu_delegate_backend in the C runtime
    header: str  # declares it (include path relative to runtime_c/include)
    sources: tuple[str, ...]  # relative to runtime_c
    libraries: tuple[str, ...] = ()  # linker flags of the library behind it
    hosted: bool = True  # needs an OS (malloc, threads): Linux boards only


@dataclass
class Partition:
    backend: str
    ops: list[Op]
    inputs: list[Tensor]  # boundary tensors read by the partition (non-constant), in first-use order
    outputs: list[Tensor]  # tensors it produces that are read after it or are graph outputs


@dataclass(frozen=True)
class Refusal:
    op: str  # the op's name
    kind: str
    backend: str
    why: str
    source: str = ""  # the user's source line, when known


@dataclass
class PartitionReport:
    """Which backend took which ops, where the graph breaks between backends, and why ops were refused."""

    partitions: list[tuple[str, list[str]]] = field(default_factory=list)  # (backend, op names) in order
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (backend, a choice it made for the whole build)
    # --quantize mixed: each layer's weight precision, chosen before partitioning (mcu/passes/mixed_choice.py)
    precision: PrecisionChoice | None = None
    weights_wait: bool = False  # the constants sit in memory with wait states (Context.weights_wait)

    @property
    def graph_breaks(self) -> int:
        """Changes of backend between consecutive partitions of the execution order."""
        return sum(1 for a, b in zip(self.partitions, self.partitions[1:]) if a[0] != b[0])

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": [{"backend": b, "ops": ops} for b, ops in self.partitions],
            "graph_breaks": self.graph_breaks,
            "refusals": [{"op": r.op, "kind": r.kind, "backend": r.backend, "why": r.why, "source": r.source}
                         for r in self.refusals],
            "notes": [{"backend": b, "note": text} for b, text in self.notes],
            "weights_wait": self.weights_wait,
            **({"precision": self.precision.to_json()} if self.precision is not None else {}),
        }


class Backend:
    """Base of every backend. Subclasses set the class attributes and override what their kind needs."""

    id: ClassVar[str] = ""
    version: ClassVar[int] = 1
    delegate: ClassVar[bool] = False
    rules: ClassVar[tuple[Rule, ...]] = ()
    runtime: ClassVar[DelegateRuntime | None] = None  # a delegate's C runtime (None: it has none)
    weights_s4: ClassVar[bool] = False  # has kernels for 4-bit weights (ops with attrs weight_bits 4, w4a8)
    weights_lut: ClassVar[bool] = False  # has kernels for look-up-table weights (attrs palette_bits)

    def options(self, ctx: Context) -> Any:
        """This backend's options in the build (``ctx.options[self.id]``), None when the build gives none."""
        return ctx.options.get(self.id)

    def settle(self, graph: Graph, ctx: Context) -> Any:
        """This backend's options completed from the whole graph, before any op is given out (defaults
        that depend on the model, e.g. a weight layout that must fit the board's flash). Default: as given."""
        return self.options(ctx)

    def note(self, ops: list[Op], graph: Graph, ctx: Context) -> str | None:
        """A choice this backend made for the whole build that its report should say (``ctx`` holds the
        settled options, ``ops`` the ops it took), or None."""
        return None

    def unavailable(self, ctx: Context) -> str | None:
        """Why this backend cannot serve this build at all (no tree, wrong core), or None."""
        return None

    def refuse(self, op: Op, ctx: Context) -> str | None:
        """Why this backend does not take ``op``, or None when it does. Default: the support table."""
        if op.attrs.get("weight_bits") == 4 and not self.weights_s4:
            return f"no {self.id} kernel for 4-bit weights"
        if op.attrs.get("palette_bits") and not self.weights_lut:
            return f"no {self.id} kernel for look-up-table weights (--weight-palette)"
        rows = [r for r in self.rules if r.kind == op.kind]
        if not rows:
            return f"no {self.id} support for {op.kind}"
        dtype = op.outputs[0].dtype if op.outputs else ""
        rows = [r for r in rows if dtype in r.dtypes]
        if not rows:
            return f"{op.kind} on {dtype} is not supported"
        scheme = weight_scheme(op)
        rows = [r for r in rows if r.quant == "any" or r.quant == scheme]
        if not rows:
            return f"{op.kind} with {scheme} weights is not supported"
        why = ""
        for r in rows:
            failed = next((c.why for c in r.constraints if not c.holds(op)), None)
            if failed is None:
                return None
            why = why or failed
        return why

    def take(self, op: Op, ctx: Context) -> None:  # kernel libraries
        """Record on ``op`` what :meth:`emit` will need, once the partitioner gave it the op (before the
        memory plan): e.g. the scratch bytes its kernel asks for (``op.attrs["scratch_bytes"]``, which the
        planner places in the arena), or ``op.attrs["no_overlap"] = True`` when its kernel does not keep
        our kernels' overlap contracts (mcu/plan/contracts.py). Default: nothing."""

    def preprocess(self, partition: Partition, ctx: Context) -> bytes:  # delegates
        raise NotImplementedError(f"{self.id} is not a delegate backend")

    def emit(self, op: Op, refs: Any) -> Any:  # kernel libraries: -> mcu.backends.calls.KernelCall
        raise NotImplementedError(f"{self.id} is not a kernel backend")

    def kernel_defines(self, calls: Sequence[tuple[Op, KernelCall]]) -> dict[str, int]:
        """Compile definitions that specialise this backend's kernel sources to one model, from the calls
        :meth:`emit` made for it (its ops and their calls, in execution order), for every build of the
        model's C. Default: none (the sources as they are)."""
        return {}

    def merge_defines(self, parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
        """The definitions of one library of several methods from each method's :meth:`kernel_defines`.
        Default: they must agree (a backend whose definitions can differ says how to serve every method)."""
        merged: dict[str, int] = {}
        for part in parts:
            for name, value in part.items():
                if merged.setdefault(name, value) != value:
                    raise ValueError(f"{self.id}: methods need {name}={merged[name]} and {name}={value}")
        return merged


def weight_scheme(op: Op) -> str:
    """The quantization scheme of an op's constant weight input (its second input):
    "per-channel", "per-tensor", or "any" when it has no quantized constant weight."""
    for t in op.inputs[1:2]:
        if t.is_constant and t.quant is not None:
            scales = set(t.quant.scale)
            return "per-tensor" if t.quant.per_tensor or len(scales) == 1 else "per-channel"
    return "any"


def _boundary(ops: list[Op], later: list[Op], graph_outputs: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    made = {id(t) for op in ops for t in op.outputs}
    inputs: dict[int, Tensor] = {}
    for op in ops:
        for t in op.inputs:
            if not t.is_constant and id(t) not in made:
                inputs.setdefault(id(t), t)
    read_later = {id(t) for op in later for t in op.inputs} | {id(t) for t in graph_outputs}
    outputs = [t for op in ops for t in op.outputs if id(t) in read_later]
    return list(inputs.values()), outputs


def _say_why_views_joined(ops: list[Op], chosen: list[Backend], usable: list[Backend],
                          report: PartitionReport) -> None:
    """A view that joined the op before it was never offered to the backends preferred over that op's: the
    report gives each of them the reason, as it does for every op a backend did not take."""
    rank = {b.id: k for k, b in enumerate(usable)}
    said = {(r.op, r.backend) for r in report.refusals}
    for op, b in zip(ops, chosen):
        if not op.attrs.get("alias"):
            continue
        for other in usable[:rank[b.id]]:
            if (op.name, other.id) not in said:
                report.refusals.append(Refusal(op.name, op.kind, other.id,
                                               f"a view emits no code: it stays with its neighbour's backend ({b.id})",
                                               op.source))


def _leading_views_join(ops: list[Op], chosen: list[Backend]) -> None:
    """Views at the start of the order (a graph input's reshape) go to the kernel library of the first op
    with code, as every later view goes to the one before it: views never split a kernel library's run."""
    first = next((i for i, op in enumerate(ops) if not op.attrs.get("alias")), None)
    if first is None or chosen[first].delegate:
        return
    for i in range(first):
        if not chosen[i].delegate:
            chosen[i] = chosen[first]


def partition(graph: Any, backends: list[Backend], ctx: Context) -> PartitionReport:
    """Give every op of ``graph`` to the first backend of ``backends`` (preference order) that takes it.

    Kernel-library backends mark the op (``op.attrs["backend"]``); a view that emits no code (``alias``)
    is not offered to them but joins the kernel library of the op before it (of the first op with code, at
    the start), so that views never split a run of one backend; runs of consecutive ops that a
    delegate takes (a run of the execution order is always a legal, convex partition) are replaced in
    ``graph.ops`` by one ``delegate`` op carrying the backend's payload. The last backend is expected
    to take everything (portable); an op that no backend takes is an error naming it and its source.
    First each backend settles its options on the whole graph (:meth:`Backend.settle`).
    """
    settled = {b.id: b.settle(graph, ctx) for b in backends}
    ctx = replace(ctx, options={**ctx.options, **{k: v for k, v in settled.items() if v is not None}})
    report = PartitionReport(precision=graph.precision, weights_wait=ctx.weights_wait)
    usable = []
    for b in backends:
        why = b.unavailable(ctx)
        if why is None:
            usable.append(b)
        else:
            report.refusals.append(Refusal("*", "*", b.id, why))
    chosen: list[Backend] = []
    for op in graph.ops:
        if op.attrs.get("alias") and chosen and not chosen[-1].delegate:
            chosen.append(chosen[-1])  # a view emits no code: it stays in the kernel library before it
            continue
        for b in usable:
            why = b.refuse(op, ctx)
            if why is None:
                chosen.append(b)
                break
            report.refusals.append(Refusal(op.name, op.kind, b.id, why, op.source))
        else:
            where = f" ({op.source})" if op.source else ""
            tried = [f"{r.backend}: {r.why}" for r in report.refusals if r.op == op.name]
            raise McuError(f"no backend takes {op.kind} ({op.name}){where}",
                           hint="; ".join(tried) if tried else "no backend is available for this build")
    _leading_views_join(graph.ops, chosen)
    taken = {(op.name, b.id) for op, b in zip(graph.ops, chosen)}
    report.refusals = [r for r in report.refusals if (r.op, r.backend) not in taken]  # a view that joined
    _say_why_views_joined(graph.ops, chosen, usable, report)
    for b in usable:
        mine = [op for op, c in zip(graph.ops, chosen) if c is b]
        text = b.note(mine, graph, ctx) if mine else None
        if text:
            report.notes.append((b.id, text))
    new_ops: list[Op] = []
    i = 0
    while i < len(graph.ops):
        b = chosen[i]
        j = i
        while j < len(graph.ops) and chosen[j] is b:
            j += 1
        run = graph.ops[i:j]
        report.partitions.append((b.id, [op.name for op in run]))
        if b.delegate:
            ins, outs = _boundary(run, graph.ops[j:], graph.outputs)
            part = Partition(b.id, run, ins, outs)
            payload = b.preprocess(part, ctx)
            new_ops.append(Op("delegate", ins, outs, {"backend": b.id, "version": b.version, "payload": payload,
                                                      "ops": [op.name for op in run]},
                              f"{b.id.replace('-', '_')}_partition_{len(report.partitions) - 1}", run[0].source))
        else:
            for op in run:
                op.attrs["backend"] = b.id
                if not op.attrs.get("alias"):
                    b.take(op, ctx)
            new_ops.extend(run)
        i = j
    graph.ops = new_ops
    return report
