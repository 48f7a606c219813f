"""A network's high-resolution prefix run as a chain of row producers: none of its tensors exists whole.

This is MCUNetV2's patch-based inference with patches one row high and the full width, and the
receptive field's halo cached instead of recomputed: every tensor inside the prefix lives in a ring of
the few rows its consumers' windows still need (a line buffer), and only the prefix's last output, at
a lower resolution, is planned whole. With a streamed input (``stream``) the model's input is one more
ring, filled a row at a time by a callback the firmware implements, so it is not in the arena at all.

The ops of a prefix are the first ops of the graph, each a convolution (any groups), an int8 depthwise
convolution or an add, in channels-last layout, batch 1; each tensor between them is read only inside
the prefix. Every op computes one output row per call from the window of input rows it reads
(``rows`` rows with ``top`` rows of padding cut off above: the bottom padding is the rows the window
lacks), through the kernel and parameters the backend gave the unfused op except those row counts and
the vertical padding, so every output element is computed by the same arithmetic as unfused.

The order of the rows is a pull schedule computed here (:func:`schedule`): to make the next row of the
prefix's output, each op first makes the input rows its window lacks, recursively, so a row that only
one 1x1 window reads is made just before it is read. A ring keeps the rows from the lowest one a
consumer will still read to the newest; when it is full, the rows still needed move to its start
(lazily: once per fill). Its size is the largest occupancy the schedule reaches, found by running the
schedule here once. The generated C (mcu/emit/prefix.py) replays the same schedule from a table of op
indices: each op makes its rows in order, so the table needs no row numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from mcu.errors import McuError
from mcu.ir import CHANNELS_LAST, DTYPE_BYTES, Graph, Op, Tensor
from mcu.plan.contracts import overlap_contracts, scratch_bytes

KIND = "stream_prefix"
ALIGNMENT = 4
INPUT = -1  # the producer index of a streamed input's rows


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass(frozen=True)
class Window:
    """How an op's output row ``y`` reads one input: rows ``y*s - pad`` .. ``y*s - pad + k - 1``."""

    k: int
    s: int
    pad: int

    def rows(self, y: int, height: int) -> tuple[int, int, int]:
        """(first row, rows, top padding) of the input that output row ``y`` reads."""
        start = y * self.s - self.pad
        lo, hi = max(start, 0), min(start + self.k, height)
        return lo, hi - lo, lo - start


@dataclass
class Ring:
    """A tensor of the prefix held as its last ``rows`` rows (at ``offset`` in the op's scratch)."""

    tensor: Tensor
    rows: int = 0
    offset: int = 0

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.tensor)

    @property
    def nbytes(self) -> int:
        return _align(self.rows * self.row_bytes)


@dataclass
class Prefix:
    """The schedule of one prefix: its ops, each tensor's ring, the order of the row calls and where the
    kernels' own scratch starts."""

    ops: list[Op]
    stream: bool
    rings: dict[int, Ring]  # by id of the tensor (a streamed input included)
    steps: list[int]  # the op (index into ops, or INPUT) making its next row, in order
    consumers: dict[int, list[tuple[int, Window]]]  # by id of a ring's tensor: (op index, window)
    stage_scratch: int = 0
    windows: list[list[Window | None]] = field(default_factory=list)  # per op, per input (None: a constant)
    # Tensors written straight into the row their only consumer then writes (by id: the consumer's index):
    # a 1x1 convolution whose pixel-buffer kernel may write its output row over its input row (its overlap
    # contract allows the output to start where the input starts) reads its input there: no ring.
    into: dict[int, int] = field(default_factory=dict)

    @property
    def input(self) -> Tensor:
        return self.ops[0].inputs[0]

    @property
    def output(self) -> Tensor:
        return self.ops[-1].output

    @property
    def stage_scratch_offset(self) -> int:
        return sum(r.nbytes for r in self.rings.values())

    @property
    def scratch_bytes(self) -> int:
        return self.stage_scratch_offset + self.stage_scratch

    def cases(self, i: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
        """Op ``i``'s output rows grouped into runs that read their inputs alike: (first row, last row,
        [(rows, top padding) of each non-constant input])."""
        op = self.ops[i]
        found: list[tuple[int, int, list[tuple[int, int]]]] = []
        for y in range(height(op.output)):
            key = [w.rows(y, height(t))[1:] for t, w in zip(op.inputs, self.windows[i]) if w is not None]
            if found and found[-1][2] == key and found[-1][1] == y - 1:
                found[-1] = (found[-1][0], y, key)
            else:
                found.append((y, y, key))
        return found


def height(t: Tensor) -> int:
    return t.shape[2]


def row_bytes(t: Tensor) -> int:
    return t.shape[1] * t.shape[3] * DTYPE_BYTES[t.dtype]


def _nhwc(t: Tensor, dtype: str) -> bool:
    return t.dtype == dtype and len(t.shape) == 4 and t.shape[0] == 1 and t.dim_order == CHANNELS_LAST \
        and t.alias_of is None and not t.is_constant


def _window(op: Op, t: Tensor) -> Window | None:
    """How ``op`` reads input ``t`` by rows (None: not by rows)."""
    if op.kind in ("conv2d", "depthwise_conv2d") and t is op.inputs[0]:
        if tuple(op.attrs.get("dilation", (1, 1))) != (1, 1):
            return None
        return Window(op.inputs[1].shape[2], op.attrs["stride"][0], op.attrs["padding"][0])
    if op.kind == "add" and len(op.inputs) == 2 and t.shape == op.output.shape:
        return Window(1, 1, 0)
    return None


def _eligible(op: Op, dtype: str) -> bool:
    if op.kind == "delegate" or op.attrs.get("alias") or len(op.outputs) != 1 or not _nhwc(op.output, dtype):
        return False
    if op.kind == "depthwise_conv2d" and op.attrs.get("ch_mult", 1) != 1:
        return False
    if op.kind not in ("conv2d", "depthwise_conv2d", "add"):
        return False
    live = [t for t in op.inputs if not t.is_constant]
    if op.kind == "add" and len(live) != 2:  # a constant operand would be read whole beside one row
        return False
    return bool(live) and all(_nhwc(t, dtype) and _window(op, t) is not None for t in live)


def candidate_ends(graph: Graph, stream: bool = False) -> list[int]:
    """Every n such that ``graph.ops[:n]`` can run as a prefix (n >= 2, or 1 with a streamed input)."""
    if len(graph.inputs) != 1 or not graph.ops:
        return []
    x = graph.inputs[0]
    dtype = x.dtype
    if not _nhwc(x, dtype) or x.is_output:
        return []
    users: dict[int, list[int]] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if not t.is_constant:
                users.setdefault(id(t), []).append(i)
    outputs = {id(t) for t in graph.outputs}
    made: set[int] = {id(x)}
    ends: list[int] = []
    first = graph.ops[0]
    if not any(t is x for t in first.inputs) or first.inputs[0] is not x:
        return []
    for n, op in enumerate(graph.ops, start=1):
        if not _eligible(op, dtype) or any(id(t) not in made for t in op.inputs if not t.is_constant):
            break
        made.add(id(op.output))
        # each tensor made before op n is read only by ops of the prefix (a streamed input too)
        inner = [t for t in (x, *(o.output for o in graph.ops[:n - 1]))]
        if all(id(t) not in outputs and all(u < n for u in users.get(id(t), [])) for t in inner
               if t is not x or stream):
            if n >= (1 if stream else 2):
                ends.append(n)
    return ends


def _stage_ops(prefix: Prefix) -> list[Op]:
    """Every distinct row call of the prefix (one per op and case of its windows)."""
    return [row_op(prefix, i, key) for i in range(len(prefix.ops)) for _, _, key in prefix.cases(i)]


def row_op(prefix: Prefix, i: int, key: list[tuple[int, int]]) -> Op:
    """Op ``i`` of ``prefix`` on row-sized tensors: each non-constant input ``rows`` rows high with ``top``
    rows of padding (``key``, one pair per such input), one output row."""
    op = prefix.ops[i]
    ins: list[Tensor] = []
    pairs = iter(key)
    top = 0
    for t, w in zip(op.inputs, prefix.windows[i]):
        if w is None:
            ins.append(t)
            continue
        rows, top_t = next(pairs)
        top = top_t if t is op.inputs[0] else top
        ins.append(_row_tensor(t, rows, f"rows{len(ins)}"))
    attrs = dict(op.attrs)
    if "padding" in attrs:
        attrs["padding"] = (top, attrs["padding"][1])
    return Op(op.kind, ins, [_row_tensor(op.output, 1, "row")], attrs, op.name, op.source)


def _row_tensor(t: Tensor, rows: int, tag: str) -> Tensor:
    return replace(t, name=f"{t.name}_{tag}", shape=(t.shape[0], t.shape[1], rows, t.shape[3]), data=None,
                   alias_of=None, is_input=False, is_output=False)


def schedule(ops: list[Op], stream: bool = False) -> Prefix:
    """The pull schedule of ``ops`` (a prefix found by :func:`candidate_ends`) and its rings' sizes: an op
    reading two tensors (an add) pulls their rows in either order, whichever needs the smaller rings
    (a shortcut made first frees the rows it reads before the main path reads further)."""
    return min((_schedule(ops, stream, order) for order in (1, -1)), key=lambda p: p.stage_scratch_offset)


def _schedule(ops: list[Op], stream: bool, order: int) -> Prefix:
    x = ops[0].inputs[0]
    windows = [[_window(op, t) if not t.is_constant else None for t in op.inputs] for op in ops]
    producer = {id(op.output): i for i, op in enumerate(ops)}
    consumers: dict[int, list[tuple[int, Window]]] = {}
    for i, op in enumerate(ops):
        for t, w in zip(op.inputs, windows[i]):
            if w is not None and (t is not x or stream):
                consumers.setdefault(id(t), []).append((i, w))
    into = {id(op.output): j for op in ops[:-1] if (j := _writes_into(ops, op.output, consumers, windows)) is not None}
    rings = {id(t): Ring(t) for t in [*([x] if stream else []), *(op.output for op in ops[:-1])] if id(t) not in into}
    made = {key: 0 for key in [*rings, *into]}
    next_row = [0] * len(ops)
    steps: list[int] = []

    def low(t: Tensor) -> int:
        needed = [max(0, next_row[j] * w.s - w.pad) for j, w in consumers[id(t)] if next_row[j] < height(ops[j].output)]
        return min(needed, default=made[id(t)])

    def write(t: Tensor, y: int) -> None:
        ring = rings[id(t)]
        ring.rows = max(ring.rows, y - low(t) + 1)
        made[id(t)] = y + 1

    def make(i: int) -> None:
        y = next_row[i]
        op = ops[i]
        for t, w in list(zip(op.inputs, windows[i]))[::order]:
            if w is None or id(t) not in made:
                continue
            lo, rows, _ = w.rows(y, height(t))
            while made[id(t)] < lo + rows:
                if id(t) in producer:
                    make(producer[id(t)])
                else:  # the streamed input
                    steps.append(INPUT)
                    write(t, made[id(t)])
        steps.append(i)
        target = ops[into[id(op.output)]].output if id(op.output) in into else op.output
        if id(target) in rings:
            write(target, y)
        made[id(op.output)] = y + 1
        next_row[i] = y + 1

    for _ in range(height(ops[-1].output)):
        make(len(ops) - 1)
    offset = 0
    for ring in rings.values():
        ring.offset = offset
        offset += ring.nbytes
    prefix = Prefix(ops=ops, stream=stream, rings=rings, steps=steps, consumers=consumers, windows=windows,
                    into=into)
    prefix.stage_scratch = max((stage_scratch_bytes(s) for s in _stage_ops(prefix)), default=0)
    return prefix


def _writes_into(ops: list[Op], t: Tensor, consumers: dict[int, list[tuple[int, Window]]],
                 windows: list[list[Window | None]]) -> int | None:
    """The op that ``t``'s rows may be written into (see Prefix.into), or None."""
    users = consumers.get(id(t), [])
    if len(users) != 1 or users[0][1] != Window(1, 1, 0):
        return None
    j = users[0][0]
    q = ops[j]
    if q.inputs[0] is not t or sum(1 for u in q.inputs if u is t) != 1 or row_bytes(t) > row_bytes(q.output):
        return None
    probe = Prefix(ops=ops, stream=False, rings={}, steps=[], consumers=consumers, windows=windows)
    row = row_op(probe, j, [(1, 0)] * sum(1 for w in windows[j] if w is not None))
    return j if any(c.input_index == 0 and c.kind in ("pixel-buffer", "elementwise") and any((lo is None or lo <= 0) and (hi is None or hi >= 0)
                                              for lo, hi in c.intervals)
                    for c in overlap_contracts(row)) else None


def stage_scratch_bytes(op: Op) -> int:
    """Scratch one row call needs (its kernel's, as the memory planner would give it unfused)."""
    return max(int(op.attrs.get("scratch_bytes", 0)), scratch_bytes(op))


def prefix_op(ops: list[Op], stream: bool = False) -> Op:
    """The one op that runs ``ops`` row by row (see the module docstring)."""
    prefix = schedule(ops, stream)
    consts: list[Tensor] = []
    for s in ops:
        consts += [t for t in s.inputs if t.is_constant and all(t is not c for c in consts)]
    inputs = consts if stream else [prefix.input, *consts]
    return Op(KIND, inputs, [prefix.output],
              {"prefix": prefix, "backend": KIND, "scratch_bytes": prefix.scratch_bytes, "scratch_name": "rings",
               "ops": [s.name for s in ops], "stream_input": stream, "no_overlap": True},
              f"prefix_{ops[0].name}", ops[0].source)


def with_prefix(graph: Graph, n: int, stream: bool = False) -> Graph:
    """A copy of ``graph`` whose first ``n`` ops run as one streamed prefix (the ops are shared)."""
    ops = [prefix_op(graph.ops[:n], stream), *graph.ops[n:]]
    return Graph(inputs=graph.inputs, outputs=graph.outputs, ops=ops, name=graph.name, fallbacks=graph.fallbacks,
                 state=graph.state, output_names=graph.output_names)


def streamed_inputs(graph: Graph) -> set[int]:
    """Ids of the graph inputs a streamed prefix reads through the firmware's callback (not in the arena)."""
    return {id(op.attrs["prefix"].input) for op in graph.ops if op.kind == KIND and op.attrs["stream_input"]}


@dataclass
class PrefixChoice:
    end: int  # ops in the prefix (0: none)
    arena: int
    arenas: dict[int, int]  # the arena of every candidate end tried (0: no prefix)


def choose_end(graph: Graph, stream: bool, arena_of: Callable[[Graph], int], budget: int | None = None) -> PrefixChoice:
    """Where the prefix of ``graph`` ends: the end giving the smallest ``arena_of`` (the shorter prefix on
    a tie, as every op in it makes its rows one call at a time), or with ``budget`` the shortest prefix
    whose arena fits it (the fewest row calls; the smallest arena when none fits). A streamed input
    needs a prefix: with none possible, McuError."""
    ends = candidate_ends(graph, stream)
    if stream and not ends:
        raise McuError("--stream-input needs a model whose first op reads the input by rows (a convolution or "
                       "an add, channels last, batch 1) and whose input nothing else reads",
                       hint="drop --stream-input for this model")
    arenas = {} if stream else {0: arena_of(graph)}
    for n in ends:
        arenas[n] = arena_of(with_prefix(graph, n, stream))
    smallest = min(arenas.values())
    if budget is not None:
        fitting = [n for n, a in arenas.items() if a <= budget]
        if fitting:
            return PrefixChoice(min(fitting), arenas[min(fitting)], arenas)
    end = min(n for n, a in arenas.items() if a == smallest)
    return PrefixChoice(end, smallest, arenas)


def ring_parts(graph: Graph) -> dict[str, list[tuple[str, int, int]]]:
    """By the name of a streamed prefix's planned scratch: (tensor, offset, bytes) of each of its rings,
    for the plan's drawing (mcu/plan/drawing.py)."""
    return {f"{op.name}_{op.attrs['scratch_name']}": [(r.tensor.name, r.offset, r.nbytes)
                                                      for r in op.attrs["prefix"].rings.values()]
            for op in graph.ops if op.kind == KIND}
