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

Each call of an op makes a band of rows: the rows its consumer's window lacks, at most the op's band
(``Prefix.bands``). The order of the calls is a pull schedule computed here (:func:`schedule`): to make
the next band of the prefix's output (its last op's band of rows), each op first makes the input rows its
window lacks, recursively, so a row that only one 1x1 window reads is made just before it is read. With
one row for the last op and no limit on the others, the prefix runs MCUNetV2's patch grid of full-width
bands: every op makes, per call, exactly the rows one output band needs (its first call the receptive
field, then each band's new rows); with a band of one row everywhere, the smallest rings. Larger bands
mean fewer calls, each paying its kernel's fixed cost, and larger rings. A ring keeps the rows from the
lowest one a consumer will still read to the newest; when the next band does not fit, the rows still
needed move to its start (lazily: once per fill). Its size is the largest occupancy the schedule
reaches, found by running the schedule here once. The generated C (mcu/emit/prefix.py) replays the same
calls from a table of (op, rows): ``Prefix.steps``; each op makes its rows in order, so a call's first
row is the op's rows made so far.
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
# A profiling build traces a prefix per step, not as one op: each step is an event of id
# ``handle | (k + 1) << TRACE_SHIFT`` (k: the op's index in the prefix, len(ops) for the streamed input's
# reader), after one empty event ``handle | TRACE_HOOKS << TRACE_SHIFT`` that measures the hooks' own cost.
TRACE_SHIFT = 16
TRACE_HOOKS = 0xFFFF


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass(frozen=True)
class Window:
    """How an op's output row ``y`` reads one input: rows ``y*s - pad`` .. ``y*s - pad + k - 1``."""

    k: int
    s: int
    pad: int

    def rows(self, y: int, height: int, n: int = 1) -> tuple[int, int, int]:
        """(first row, rows, top padding) of the input that output rows ``y`` .. ``y + n - 1`` read."""
        start = y * self.s - self.pad
        lo, hi = max(start, 0), min(start + (n - 1) * self.s + self.k, height)
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


# One call of the schedule: (the op: an index into Prefix.ops, or INPUT; the rows it makes). Each op makes
# its rows in order, so a step's first row is the sum of that op's earlier steps' rows.
Step = tuple[int, int]


@dataclass
class Prefix:
    """The schedule of one prefix: its ops, each tensor's ring, the order of the band calls and where the
    kernels' own scratch starts."""

    ops: list[Op]
    stream: bool
    rings: dict[int, Ring]  # by id of the tensor (a streamed input included)
    steps: list[Step]  # the calls in order: (op index or INPUT, rows made)
    consumers: dict[int, list[tuple[int, Window]]]  # by id of a ring's tensor: (op index, window)
    stage_scratch: int = 0
    windows: list[list[Window | None]] = field(default_factory=list)  # per op, per input (None: a constant)
    # Tensors written straight into the rows their only consumer then writes (by id: the consumer's index):
    # a 1x1 convolution whose pixel-buffer kernel may write its output rows over its input rows (its overlap
    # contract allows the output to start where the input starts) reads its input there: no ring.
    into: dict[int, int] = field(default_factory=dict)
    # Per op: the most output rows a call makes (a call makes what its consumer's window lacks, up to that:
    # the prefix's last op its band, each other op its share of a band of its consumers').
    bands: list[int] = field(default_factory=list)
    input_band: int = 1  # the most rows a call of a streamed input's callback reads

    def band(self, i: int) -> int:
        """The most rows a call of op ``i`` (INPUT: the streamed input) makes."""
        return self.input_band if i == INPUT else self.bands[i]

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

    @property
    def calls(self) -> int:
        """Kernel and callback calls of one inference."""
        return len(self.steps)

    def calls_of(self, i: int) -> list[tuple[int, int]]:
        """Op ``i``'s calls (INPUT: the streamed input's) in order: (first row, rows)."""
        found: list[tuple[int, int]] = []
        y = 0
        for j, n in self.steps:
            if j == i:
                found.append((y, n))
                y += n
        return found

    def cases(self, i: int) -> list[tuple[int, int, int, list[tuple[int, int]]]]:
        """Op ``i``'s calls grouped into runs that read their inputs alike: (first row of the first call,
        first row of the last call, rows per call, [(rows, top padding) of each non-constant input])."""
        op = self.ops[i]
        found: list[tuple[int, int, int, list[tuple[int, int]]]] = []
        for y, n in self.calls_of(i):
            key = [w.rows(y, height(t), n)[1:] for t, w in zip(op.inputs, self.windows[i]) if w is not None]
            if found and found[-1][2] == n and found[-1][3] == key:
                found[-1] = (found[-1][0], y, n, key)
            else:
                found.append((y, y, n, key))
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
    """Every distinct band call of the prefix (one per op and case of its windows)."""
    return [row_op(prefix, i, key, n) for i in range(len(prefix.ops)) for _, _, n, key in prefix.cases(i)]


def row_op(prefix: Prefix, i: int, key: list[tuple[int, int]], n: int = 1) -> Op:
    """Op ``i`` of ``prefix`` on band-sized tensors: each non-constant input ``rows`` rows high with ``top``
    rows of padding (``key``, one pair per such input), ``n`` output rows."""
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
    return Op(op.kind, ins, [_row_tensor(op.output, n, "row")], attrs, op.name, op.source)


def _row_tensor(t: Tensor, rows: int, tag: str) -> Tensor:
    return replace(t, name=f"{t.name}_{tag}", shape=(t.shape[0], t.shape[1], rows, t.shape[3]), data=None,
                   alias_of=None, is_input=False, is_output=False)


def schedule(ops: list[Op], stream: bool = False, bands: list[int] | None = None, input_band: int = 1) -> Prefix:
    """The pull schedule of ``ops`` (a prefix found by :func:`candidate_ends`) making ``bands[i]`` rows of
    op ``i`` per call (None: one row each; a streamed input ``input_band`` rows per callback call), and
    its rings' sizes: an op reading two tensors (an add) pulls their rows in either order, whichever needs
    the smaller rings (a shortcut made first frees the rows it reads before the main path reads further)."""
    bands = bands or [1] * len(ops)
    if len(bands) != len(ops):
        raise ValueError(f"{len(bands)} bands for a prefix of {len(ops)} ops")
    bands = [min(max(b, 1), height(op.output)) for b, op in zip(bands, ops)]
    input_band = min(max(input_band, 1), height(ops[0].inputs[0]))
    return min((_schedule(ops, stream, order, bands, input_band) for order in (1, -1)),
               key=lambda p: p.stage_scratch_offset)


def _schedule(ops: list[Op], stream: bool, order: int, bands: list[int], input_band: int) -> Prefix:
    x = ops[0].inputs[0]
    windows = [[_window(op, t) if not t.is_constant else None for t in op.inputs] for op in ops]
    producer = {id(op.output): i for i, op in enumerate(ops)}
    consumers: dict[int, list[tuple[int, Window]]] = {}
    for i, op in enumerate(ops):
        for t, w in zip(op.inputs, windows[i]):
            if w is not None and (t is not x or stream):
                consumers.setdefault(id(t), []).append((i, w))
    into: dict[int, int] = {}
    for i, op in enumerate(ops[:-1]):
        # one call of the producer makes all the rows one call of the consumer reads: they are contiguous
        if (j := _writes_into(ops, op.output, consumers, windows, bands)) is not None and bands[i] >= bands[j]:
            into[id(op.output)] = j
    rings = {id(t): Ring(t) for t in [*([x] if stream else []), *(op.output for op in ops[:-1])] if id(t) not in into}
    made = {key: 0 for key in [*rings, *into]}
    next_row = [0] * len(ops)
    steps: list[Step] = []

    def low(t: Tensor) -> int:
        needed = [max(0, next_row[j] * w.s - w.pad) for j, w in consumers[id(t)] if next_row[j] < height(ops[j].output)]
        return min(needed, default=made[id(t)])

    def write(t: Tensor, y: int, n: int) -> None:
        ring = rings[id(t)]
        ring.rows = max(ring.rows, y + n - min(low(t), y))  # a band holds its rows no window reads too
        made[id(t)] = y + n

    def make(i: int, want: int) -> None:
        """The next call of op ``i``: its rows up to ``want`` (what its consumer's window lacks), at most its
        band."""
        y = next_row[i]
        op = ops[i]
        n = min(bands[i], want - y)
        for t, w in list(zip(op.inputs, windows[i]))[::order]:
            if w is None or id(t) not in made:
                continue
            lo, rows, _ = w.rows(y, height(t), n)
            while made[id(t)] < lo + rows:
                if id(t) in producer:
                    make(producer[id(t)], lo + rows)
                else:  # the streamed input
                    m = min(input_band, lo + rows - made[id(t)])
                    steps.append((INPUT, m))
                    write(t, made[id(t)], m)
        steps.append((i, n))
        target = ops[into[id(op.output)]].output if id(op.output) in into else op.output
        if id(target) in rings:
            write(target, y, n)
        made[id(op.output)] = y + n
        next_row[i] = y + n

    last = height(ops[-1].output)
    while next_row[-1] < last:
        make(len(ops) - 1, last)
    offset = 0
    for ring in rings.values():
        ring.offset = offset
        offset += ring.nbytes
    prefix = Prefix(ops=ops, stream=stream, rings=rings, steps=steps, consumers=consumers, windows=windows,
                    into=into, bands=bands, input_band=input_band)
    prefix.stage_scratch = max((stage_scratch_bytes(s) for s in _stage_ops(prefix)), default=0)
    return prefix


def _writes_into(ops: list[Op], t: Tensor, consumers: dict[int, list[tuple[int, Window]]],
                 windows: list[list[Window | None]], bands: list[int]) -> int | None:
    """The op that ``t``'s rows may be written into (see Prefix.into), or None."""
    users = consumers.get(id(t), [])
    if len(users) != 1 or users[0][1] != Window(1, 1, 0):
        return None
    j = users[0][0]
    n = bands[j]
    q = ops[j]
    if q.inputs[0] is not t or sum(1 for u in q.inputs if u is t) != 1 or row_bytes(t) > row_bytes(q.output):
        return None
    probe = Prefix(ops=ops, stream=False, rings={}, steps=[], consumers=consumers, windows=windows)
    row = row_op(probe, j, [(n, 0)] * sum(1 for w in windows[j] if w is not None), n)
    return j if any(c.input_index == 0 and c.kind in ("pixel-buffer", "elementwise") and any((lo is None or lo <= 0) and (hi is None or hi >= 0)
                                              for lo, hi in c.intervals)
                    for c in overlap_contracts(row)) else None


def stage_scratch_bytes(op: Op) -> int:
    """Scratch one row call needs (its kernel's, as the memory planner would give it unfused)."""
    return max(int(op.attrs.get("scratch_bytes", 0)), scratch_bytes(op))


@dataclass(frozen=True)
class PrefixSchedule:
    """A prefix to build: its first ``end`` ops of the graph, each making ``bands[i]`` output rows per call,
    a streamed input read ``input_band`` rows per callback call."""

    end: int
    bands: tuple[int, ...]
    input_band: int = 1

    @staticmethod
    def rows(end: int) -> "PrefixSchedule":
        """One row per call everywhere: the smallest rings."""
        return PrefixSchedule(end, (1,) * end, 1)

    def key(self) -> str:
        """A stable text key (a measurement cache's)."""
        return f"{self.end}:{','.join(map(str, self.bands))}:{self.input_band}"

    def describe(self) -> str:
        """The bands in words, for reports and errors."""
        if set(self.bands) == {1} and self.input_band == 1:
            return f"the first {self.end} ops streamed row by row"
        return f"the first {self.end} ops streamed in bands of {'/'.join(str(b) for b in self.bands)} rows"


def prefix_op(ops: list[Op], stream: bool = False, bands: tuple[int, ...] | None = None, input_band: int = 1) -> Op:
    """The one op that runs ``ops`` band by band (see the module docstring)."""
    prefix = schedule(ops, stream, list(bands) if bands else None, input_band)
    consts: list[Tensor] = []
    for s in ops:
        consts += [t for t in s.inputs if t.is_constant and all(t is not c for c in consts)]
    inputs = consts if stream else [prefix.input, *consts]
    return Op(KIND, inputs, [prefix.output],
              {"prefix": prefix, "backend": KIND, "scratch_bytes": prefix.scratch_bytes, "scratch_name": "rings",
               "ops": [s.name for s in ops], "stream_input": stream, "no_overlap": True},
              f"prefix_{ops[0].name}", ops[0].source)


def with_prefix(graph: Graph, n: int | PrefixSchedule, stream: bool = False) -> Graph:
    """A copy of ``graph`` whose first ops run as one streamed prefix (the ops are shared): ``n`` ops row by
    row, or a :class:`PrefixSchedule`."""
    plan = n if isinstance(n, PrefixSchedule) else PrefixSchedule.rows(n)
    ops = [prefix_op(graph.ops[:plan.end], stream, plan.bands, plan.input_band), *graph.ops[plan.end:]]
    return Graph(inputs=graph.inputs, outputs=graph.outputs, ops=ops, name=graph.name, fallbacks=graph.fallbacks,
                 state=graph.state, output_names=graph.output_names)


def streamed_inputs(graph: Graph) -> set[int]:
    """Ids of the graph inputs a streamed prefix reads through the firmware's callback (not in the arena)."""
    return {id(op.attrs["prefix"].input) for op in graph.ops if op.kind == KIND and op.attrs["stream_input"]}


def _least_arena(graph: Graph, end: int, stream: bool) -> int:
    """No arena of a prefix of ``end`` ops is smaller: while it runs, its output and (unless streamed) its
    input are both in the arena, apart."""
    ops = graph.ops[:end]
    return ops[-1].output.nbytes + (0 if stream else ops[0].inputs[0].nbytes)


def band_schedules(graph: Graph, end: int) -> list[PrefixSchedule]:
    """The bands tried for the prefix of ``end`` ops, whatever the budget: one row per call everywhere; the
    patch grid (the prefix's output R rows per call, R = 1, 2, 4, ..., every other op making the rows one
    output band needs in one call); and at most R rows per call of every op (R = 2, 4, 8)."""
    ops = graph.ops[:end]
    heights = tuple(height(op.output) for op in ops)
    h_in = height(ops[0].inputs[0])
    found = [PrefixSchedule.rows(end)]
    r = 1
    while r < heights[-1]:
        found.append(PrefixSchedule(end, (*heights[:-1], r), h_in))
        r *= 2
    for r in (2, 4, 8):
        found.append(PrefixSchedule(end, tuple(min(h, r) for h in heights), min(h_in, r)))
    return list(dict.fromkeys(found))


@dataclass
class PrefixChoice:
    schedule: PrefixSchedule | None  # None: no prefix
    arena: int
    arenas: dict[PrefixSchedule | None, int]  # the arena of every schedule tried (None: no prefix)
    calls: dict[PrefixSchedule | None, int]  # its prefix's calls (None: 0)


def choose_schedule(graph: Graph, stream: bool, arena_of: Callable[[Graph], int],
                    budget: int | None = None, every: bool = False) -> PrefixChoice:
    """Where the prefix of ``graph`` ends and how many rows each op makes per call. Without ``budget``: the
    smallest ``arena_of``, and of the schedules reaching it the fewest calls (each call pays a kernel's
    fixed cost), then the shorter prefix; with ``budget``: of the schedules that fit it, the fewest calls,
    the smaller arena on a tie (the smallest arena when none fits; measured instructions instead of calls:
    mcu/devtools/fusion_costs.py). The schedules tried do not depend on the budget, so a larger budget
    never picks more calls. ``every``: ``arenas`` and ``calls`` hold every schedule tried, not only those
    that could be chosen. A streamed input needs a prefix: with none possible, McuError."""
    ends = candidate_ends(graph, stream)
    if stream and not ends:
        raise McuError("--stream-input needs a model whose first op reads the input by rows (a convolution or "
                       "an add, channels last, batch 1) and whose input nothing else reads",
                       hint="drop --stream-input for this model")
    arenas: dict[PrefixSchedule | None, int] = {} if stream else {None: arena_of(graph)}
    calls: dict[PrefixSchedule | None, int] = {} if stream else {None: 0}

    def evaluate(plan: PrefixSchedule) -> None:
        g = with_prefix(graph, plan, stream)
        arenas[plan] = arena_of(g)
        calls[plan] = next(op.attrs["prefix"].calls for op in g.ops if op.kind == KIND)

    for n in ends:
        evaluate(PrefixSchedule.rows(n))
    for n in ends:  # the other bands of each end that may reach the arena sought
        limit = budget if budget is not None else min(arenas.values())
        if every or _least_arena(graph, n, stream) <= limit:
            for plan in band_schedules(graph, n)[1:]:
                evaluate(plan)
    smallest = min(arenas.values())

    def fewest(plans: list[PrefixSchedule | None]) -> PrefixSchedule | None:
        return min(plans, key=lambda p: (calls[p], arenas[p], p.end if p else 0))

    if budget is not None:
        fitting = [p for p, a in arenas.items() if a <= budget]
        if fitting:
            best = fewest(fitting)
            return PrefixChoice(best, arenas[best], arenas, calls)
    best = fewest([p for p, a in arenas.items() if a == smallest])
    return PrefixChoice(best, smallest, arenas, calls)


@dataclass(frozen=True)
class PrefixCandidate:
    schedule: PrefixSchedule
    arena: int
    calls: int


def prefix_candidates(graph: Graph, arena_of: Callable[[Graph], int], below: int | None = None) -> list[PrefixCandidate]:
    """The streamed prefixes (whole input in the arena) that a RAM budget weighs against whole tensors and
    fused blocks, smallest arena first: of every end and band of :func:`band_schedules`, those no other
    beats in both arena and calls, with an arena below ``arena_of(graph)`` (and ``below``). They do not
    depend on a budget."""
    base = min(arena_of(graph), below) if below is not None else arena_of(graph)
    found: list[PrefixCandidate] = []
    for n in candidate_ends(graph):
        if _least_arena(graph, n, False) >= base:
            continue
        for plan in band_schedules(graph, n):
            g = with_prefix(graph, plan)
            found.append(PrefixCandidate(plan, arena_of(g), next(op.attrs["prefix"].calls for op in g.ops if op.kind == KIND)))
    result: list[PrefixCandidate] = []
    for c in sorted(found, key=lambda c: (c.arena, c.calls, c.schedule.end)):
        if c.arena < base and (not result or c.calls < result[-1].calls):
            result.append(c)
    return result


def ring_parts(graph: Graph) -> dict[str, list[tuple[str, int, int, int, int]]]:
    """By the name of a streamed prefix's planned scratch: (tensor, offset, bytes, rows kept, rows its producer
    writes per call: its band) of each of its rings, for the plan's drawing (mcu/plan/drawing.py)."""
    return {f"{op.name}_{op.attrs['scratch_name']}": [(r.tensor.name, r.offset, r.nbytes, r.rows,
                                                      _producer_band(op.attrs["prefix"], r.tensor))
                                                     for r in op.attrs["prefix"].rings.values()]
            for op in graph.ops if op.kind == KIND}


def _producer_band(p: Prefix, t: Tensor) -> int:
    """The most rows one call writes into ``t``'s ring: its producer's band (the reader's for the input)."""
    for i, o in enumerate(p.ops):
        if o.output is t:
            return p.band(i)
    return p.band(INPUT)
