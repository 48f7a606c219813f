"""Fused execution of an inverted-residual block, band by band of rows: the expanded tensor never exists whole.

A block is a chain of int8 (or fp32) ops in channels-last layout:

    x -> producer (a convolution, one group: the 1x1 expansion, or a network's first 3x3 convolution)
      -> depthwise (kernel K rows, stride S)
      -> projection (1x1 convolution)
      -> add of x (the residual; optional)

or, int8, a ResNet basic block: a convolution, a second kxk convolution in the window stage writing the
block's rows (no projection), and the add of x or of a 1x1 strided convolution of x (the shortcut,
computed a band at a time into scratch).

Run whole, the producer's output ``e`` (the expanded tensor, often the largest of the network) lives in
the arena from the producer to the depthwise. Fused, one op computes the block's output a band of B
output rows at a time (B = 1 where memory is tightest): the band's depthwise reads rows
``oy*S - pad .. oy*S - pad + (B-1)*S + K - 1`` of ``e``, which sit in a ring in the op's scratch; the
K - S rows the previous band also read stay (moved down), the others are computed by the producer from
``x`` one row at a time, and rows outside ``e`` (the depthwise's vertical padding) are filled with the
depthwise's input zero point (0 in fp32), which its arithmetic treats exactly as padding
(``(zp + input_offset) * w == 0``). The depthwise then makes the band of its output (scratch rows), the
projection the band of the block's output, and the residual adds the band of ``x`` to it. Each call
goes through the same kernel the unfused op runs, with the same parameters except the row counts and
vertical padding, so every output element is computed by the same arithmetic as unfused.

The fused op keeps the ops it replaces (``attrs["stages"]``) for the emitter (mcu/emit/fused.py), which
asks each stage's backend for its call on band-sized tensors (:func:`row_ops`). This module finds what
can fuse (:func:`find_chains`), builds the fused op (:func:`fused_op`, :func:`with_fused`) and holds
the geometry the memory planner and the emitter share (:class:`Block`); mcu/plan/fusion.py chooses
which blocks fuse and their bands.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mcu.ir import CHANNELS_LAST, DTYPE_BYTES, Graph, Op, Tensor
from mcu.plan.contracts import Interval, scratch_bytes

KIND = "fused_block"
ALIGNMENT = 4


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass(frozen=True)
class Block:
    """The geometry of one fused block (NHWC, batch 1; rows in bytes)."""

    in_h: int
    in_w: int
    in_c: int
    e_h: int
    e_w: int
    e_c: int
    out_h: int  # the depthwise's (and the block's) output rows
    out_w: int
    out_c: int
    p_kernel: int  # producer: window rows, stride, top padding
    p_stride: int
    p_pad: int
    k: int  # depthwise: window rows, stride, top padding
    s: int
    pad: int
    residual: bool
    zero_point: int  # the depthwise's input zero point (int8; 0 for fp32): the ring's padding rows
    elem: int = 1  # bytes an element: 1 (int8) or 4 (fp32)
    band: int = 1  # output rows one pass of the loop makes (each kernel call covers them all)
    project: bool = True  # a 1x1 projection follows the window stage (else it writes the block's rows)
    shortcut_stride: int = 0  # the residual is a 1x1 convolution of x with this stride (0: x itself)

    @property
    def in_row(self) -> int:  # bytes
        return self.in_w * self.in_c * self.elem

    @property
    def e_row(self) -> int:  # bytes
        return self.e_w * self.e_c * self.elem

    @property
    def d_row(self) -> int:  # bytes of the window stage's output row in scratch (none when it writes the block's)
        return self.out_w * self.e_c * self.elem if self.project or self.shortcut_stride else 0

    @property
    def sc_row_offset(self) -> int:  # the shortcut's band of rows in scratch, after the window stage's
        return self.ring_bytes + _align(self.band * self.d_row)

    @property
    def out_row(self) -> int:  # bytes
        return self.out_w * self.out_c * self.elem

    @property
    def keep(self) -> int:
        """Ring rows one band of output rows hands to the next."""
        return max(self.k - self.s, 0)

    def window(self, rows: int) -> int:
        """Rows of ``e`` that ``rows`` output rows read."""
        return (rows - 1) * self.s + self.k

    @property
    def ring_bytes(self) -> int:
        return _align(self.window(self.band) * self.e_row)

    @property
    def d_row_offset(self) -> int:
        return self.ring_bytes

    @property
    def stage_scratch_offset(self) -> int:
        return self.sc_row_offset + (_align(self.band * self.out_row) if self.shortcut_stride else 0)

    def bands(self) -> list[tuple[int, int]]:
        """(first output row, rows) of each pass of the loop."""
        return [(oy, min(self.band, self.out_h - oy)) for oy in range(0, self.out_h, self.band)]

    def producer_rows(self, ey: int) -> tuple[int, int, int]:
        """(first input row, rows, top padding) that producer row ``ey`` reads."""
        start = ey * self.p_stride - self.p_pad
        lo, hi = max(start, 0), min(start + self.p_kernel, self.in_h)
        return lo, hi - lo, lo - start

    def first_fresh(self, oy: int) -> int:
        """The first row of ``e`` that the band starting at output row ``oy`` computes (earlier ones are
        in the ring)."""
        return oy * self.s - self.pad + (0 if oy == 0 else self.keep)

    def max_overlap_delta(self) -> int | None:
        """The largest (output start - input start) in bytes at which writing the block's output over its
        input is safe (None: no input byte is read after the first output bytes are written; the planner
        then overlaps nothing, which is never wrong): a band's output bytes must end below every input byte
        read after they are written: the producer rows of later bands and, with a residual, the band's
        own input rows (the projection writes the band before the add reads them)."""
        bound: int | None = None
        for oy, rows in self.bands():
            needed = []
            if oy + rows < self.out_h:
                fresh = [ey for ey in range(self.first_fresh(oy + rows), self.e_h) if ey >= 0]
                if fresh:
                    needed.append(self.producer_rows(fresh[0])[0] * self.in_row)
            if self.shortcut_stride:  # the shortcut reads its band's rows before the add writes
                if oy + rows < self.out_h:
                    needed.append((oy + rows) * self.shortcut_stride * self.in_row)
            elif self.residual:
                needed.append(oy * self.in_row)
            if not needed:
                continue
            d = min(needed) - (oy + rows) * self.out_row
            bound = d if bound is None else min(bound, d)
        return bound


def overlap_intervals(op: Op) -> tuple[Interval, ...]:
    """Where a fused block's output may start relative to its input (see Block.max_overlap_delta). No
    kernel call of the block sees both (the rows go through the ring and the scratch row, and a residual
    row ends before its input row starts), so unlike a window kernel's contract the bound may be positive."""
    d = op.attrs["block"].max_overlap_delta()
    return () if d is None else ((None, d),)


def _nhwc(t: Tensor, dtype: str) -> bool:
    return t.dtype == dtype and len(t.shape) == 4 and t.shape[0] == 1 and t.dim_order == CHANNELS_LAST \
        and t.alias_of is None and not t.is_constant


def _one_user(graph: Graph, t: Tensor, users: dict[int, list[Op]]) -> Op | None:
    found = users.get(id(t), [])
    if len(found) != 1 or t.is_output or any(o is t for o in graph.outputs):
        return None
    return found[0]


def _plain(op: Op) -> bool:
    return op.kind != "delegate" and not op.attrs.get("alias") and not op.attrs.get("palette_bits") \
        and all(t.alias_of is None for t in op.outputs)


def _projects(stages: list[Op]) -> bool:
    return len(stages) > 2 and stages[2].kind == "conv2d" and stages[2].inputs[0] is stages[1].output


def _shortcut(stages: list[Op]) -> Op | None:
    return stages[2] if len(stages) > 2 and stages[2].kind == "conv2d" and not _projects(stages) else None


def block_of(stages: list[Op], band: int = 1) -> Block:
    p, d = stages[:2]
    q = stages[2] if _projects(stages) else d
    x, e, y = p.inputs[0], p.output, d.output
    return Block(in_h=x.shape[2], in_w=x.shape[3], in_c=x.shape[1], e_h=e.shape[2], e_w=e.shape[3], e_c=e.shape[1],
                 out_h=y.shape[2], out_w=y.shape[3], out_c=q.output.shape[1],
                 p_kernel=p.inputs[1].shape[2], p_stride=p.attrs["stride"][0], p_pad=p.attrs["padding"][0],
                 k=d.inputs[1].shape[2], s=d.attrs["stride"][0], pad=d.attrs["padding"][0],
                 residual=stages[-1].kind == "add", zero_point=-int(d.attrs.get("input_offset", 0)),
                 elem=DTYPE_BYTES[x.dtype], band=max(1, min(band, y.shape[2])), project=_projects(stages),
                 shortcut_stride=sc.attrs["stride"][0] if (sc := _shortcut(stages)) is not None else 0)


def _match(graph: Graph, d: Op, producers: dict[int, Op], users: dict[int, list[Op]]) -> list[Op] | None:
    """[producer, depthwise, projection(, add)] around depthwise ``d``, or None."""
    dtype = d.output.dtype
    int8_dw = d.kind == "depthwise_conv2d" and dtype == "int8" and d.attrs.get("ch_mult", 1) == 1
    fp32_dw = d.kind == "conv2d" and dtype == "float32" and d.inputs[0].shape[1] == d.output.shape[1] > 1 \
        and d.attrs.get("groups", 1) == d.output.shape[1]
    # int8 only: a full convolution in the window stage, with the residual and no projection (a
    # ResNet basic block: conv3x3 -> conv3x3 -> add of the block's input)
    int8_conv = d.kind == "conv2d" and dtype == "int8" and d.attrs.get("groups", 1) == 1 \
        and d.inputs[1].shape[2] > 1
    if not (int8_dw or fp32_dw or int8_conv) or not _plain(d) or tuple(d.attrs["dilation"]) != (1, 1):
        return None
    e = d.inputs[0]
    p = producers.get(id(e))
    if p is None or p.kind != "conv2d" or not _plain(p) or p.attrs.get("groups", 1) != 1 \
            or tuple(p.attrs["dilation"]) != (1, 1) or _one_user(graph, e, users) is not d:
        return None
    if int8_conv:
        x = p.inputs[0]
        a = _one_user(graph, d.output, users)
        if a is None or a.kind != "add" or not _plain(a) or len(a.inputs) != 2 or a.inputs[0] is a.inputs[1] \
                or not all(_nhwc(t, dtype) for t in (x, e, d.output, a.output)) \
                or a.output.shape != d.output.shape or not any(t is d.output for t in a.inputs):
            return None
        if any(t is x for t in a.inputs) and x.shape == d.output.shape:
            return [p, d, a]
        r = next(t for t in a.inputs if t is not d.output)
        sc = producers.get(id(r))
        if sc is None or sc.kind != "conv2d" or not _plain(sc) or sc.inputs[0] is not x \
                or _one_user(graph, r, users) is not a or (sc.inputs[1].shape[2], sc.inputs[1].shape[3]) != (1, 1) \
                or tuple(sc.attrs["padding"]) != (0, 0) or sc.attrs.get("groups", 1) != 1 \
                or sc.attrs["stride"][0] != sc.attrs["stride"][1] or not _nhwc(r, dtype) \
                or sc.attrs["stride"][0] * (d.output.shape[2] - 1) >= x.shape[2]:
            return None
        return [p, d, sc, a]
    q = _one_user(graph, d.output, users)
    if q is None or q.kind != "conv2d" or not _plain(q) or q.inputs[0] is not d.output:
        return None
    w = q.inputs[1]
    if (w.shape[2], w.shape[3]) != (1, 1) or tuple(q.attrs["stride"]) != (1, 1) \
            or tuple(q.attrs["padding"]) != (0, 0) or q.attrs.get("groups", 1) != 1:
        return None
    x = p.inputs[0]
    if not all(_nhwc(t, dtype) for t in (x, e, d.output, q.output)):
        return None
    stages = [p, d, q]
    a = _one_user(graph, q.output, users)
    if a is not None and a.kind == "add" and _plain(a) and len(a.inputs) == 2 and _nhwc(a.output, dtype) \
            and a.output.shape == q.output.shape == x.shape and any(t is x for t in a.inputs) \
            and any(t is q.output for t in a.inputs) and a.inputs[0] is not a.inputs[1]:
        stages.append(a)
    return stages


def find_chains(graph: Graph) -> list[list[Op]]:
    """Every chain of ``graph.ops`` that can run fused, each as [producer, depthwise, projection(, add)], in
    op order; the chains share no op and each runs back to back in the op order."""
    producers = {id(t): op for op in graph.ops for t in op.outputs}
    users: dict[int, list[Op]] = {}
    for op in graph.ops:
        for t in op.inputs:
            if not t.is_constant:
                lst = users.setdefault(id(t), [])
                if op not in lst:
                    lst.append(op)
    position = {id(op): i for i, op in enumerate(graph.ops)}
    matches: list[list[Op]] = []
    for op in graph.ops:
        stages = _match(graph, op, producers, users)
        at = sorted(position[id(s)] for s in stages) if stages is not None else []
        if stages is not None and at[-1] - at[0] + 1 == len(stages):
            matches.append(stages)  # else another op runs between two stages
    # Two chains can share an op (a 1x1 convolution projecting one block and expanding the next, as in
    # MobileNetV1): the one whose expanded tensor is larger is kept, as its fusion saves more.
    taken: set[int] = set()
    chains: list[list[Op]] = []
    for stages in sorted(matches, key=lambda c: -expanded_bytes(c)):  # stable: equal tensors in op order
        if not any(id(s) in taken for s in stages):
            taken.update(id(s) for s in stages)
            chains.append(stages)
    return sorted(chains, key=lambda c: position[id(c[0])])


def fused_op(stages: list[Op], band: int = 1) -> Op:
    """The one op that runs ``stages`` ``band`` output rows at a time."""
    x = stages[0].inputs[0]
    consts: list[Tensor] = []
    for s in stages:
        consts += [t for t in s.inputs if t.is_constant and all(t is not c for c in consts)]
    block = block_of(stages, band)
    stage_scratch = max(stage_scratch_bytes(s) for _, rows in block.bands()
                        for s in row_ops(stages, block, out_rows=rows))
    return Op(KIND, [x, *consts], [stages[-1].output],
              {"stages": stages, "block": block, "backend": KIND,
               "scratch_bytes": block.stage_scratch_offset + stage_scratch, "scratch_name": "ring",
               "ops": [s.name for s in stages]},
              f"fused_{stages[0].name}", stages[0].source)


def with_fused(graph: Graph, chains: list[list[Op]], bands: dict[int, int] | None = None) -> Graph:
    """A copy of ``graph`` whose op list runs each of ``chains`` as one fused op (the ops are shared);
    ``bands``: output rows per pass by id of a chain's first op (default 1)."""
    chain_of = {id(s): stages for stages in chains for s in stages}
    done: set[int] = set()
    ops: list[Op] = []
    for op in graph.ops:  # a fused op runs where its first stage in the op order ran
        stages = chain_of.get(id(op))
        if stages is None:
            ops.append(op)
        elif id(stages[0]) not in done:
            done.add(id(stages[0]))
            ops.append(fused_op(stages, (bands or {}).get(id(stages[0]), 1)))
    return Graph(inputs=graph.inputs, outputs=graph.outputs, ops=ops, name=graph.name, fallbacks=graph.fallbacks,
                 state=graph.state, output_names=graph.output_names)


def expanded_bytes(stages: list[Op]) -> int:
    """Bytes of the tensor a chain's fusion keeps from existing whole."""
    return stages[0].output.nbytes


def stage_scratch_bytes(op: Op) -> int:
    """Scratch one row call of a stage needs (its kernel's, as the memory planner would give it unfused)."""
    return max(int(op.attrs.get("scratch_bytes", 0)), scratch_bytes(op))


def _row_tensor(t: Tensor, rows: int, tag: str) -> Tensor:
    return replace(t, name=f"{t.name}_{tag}", shape=(t.shape[0], t.shape[1], rows, t.shape[3]), data=None,
                   alias_of=None, is_input=False, is_output=False)


def row_ops(stages: list[Op], block: Block, producer_rows: tuple[int, int] = (1, 0),
            out_rows: int | None = None) -> list[Op]:
    """The stages as ops on row-sized tensors: the producer reading ``producer_rows`` = (rows, top padding)
    of ``x`` for one row of ``e``, the depthwise reading the ring's rows (no vertical padding: the ring
    holds it) for ``out_rows`` output rows (default: a band), the projection and the add on those rows."""
    p, d = stages[:2]
    rows, top = producer_rows
    band = block.band if out_rows is None else out_rows
    x_in = _row_tensor(p.inputs[0], rows, "rows")
    e_row = _row_tensor(p.output, 1, "row")
    ring = _row_tensor(p.output, block.window(band), "ring")
    d_row = _row_tensor(d.output, band, "row")
    result = [
        Op(p.kind, [x_in, *p.inputs[1:]], [e_row], {**p.attrs, "padding": (top, p.attrs["padding"][1])},
           p.name, p.source),
        Op(d.kind, [ring, *d.inputs[1:]], [d_row], {**d.attrs, "padding": (0, d.attrs["padding"][1])},
           d.name, d.source),
    ]
    y_row = d_row
    if block.project:
        q = stages[2]
        y_row = _row_tensor(q.output, band, "row")
        result.append(Op(q.kind, [d_row, *q.inputs[1:]], [y_row], dict(q.attrs), q.name, q.source))
    sc = _shortcut(stages)
    if sc is not None:  # its band of rows from x's rows (every stride-th), into scratch
        sc_in = _row_tensor(p.inputs[0], (band - 1) * block.shortcut_stride + 1, "sc_rows")
        y_row = _row_tensor(d.output, band, "out_row")
        sc_row = _row_tensor(sc.output, band, "row")
        result.append(Op(sc.kind, [sc_in, *sc.inputs[1:]], [sc_row], dict(sc.attrs), sc.name, sc.source))
        a = stages[-1]
        ins = [d_row if t is d.output else sc_row for t in a.inputs]
        result.append(Op(a.kind, ins, [y_row], dict(a.attrs), a.name, a.source))
    elif block.residual:
        a = stages[-1]
        x_row = _row_tensor(p.inputs[0], band, "row")
        ins = [x_row if t is p.inputs[0] else y_row for t in a.inputs]
        result.append(Op(a.kind, ins, [y_row], dict(a.attrs), a.name, a.source))
    return result
