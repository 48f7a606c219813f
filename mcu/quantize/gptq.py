"""Error-compensating weight rounding (GPTQ/OPTQ, Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization
for Generative Pre-trained Transformers") on a calibrated pt2e model, before bias correction and ``convert_pt2e``.

Rounding each weight to its nearest code leaves every layer an output error of (W - Q) X. GPTQ takes a layer's
input columns one after the other, rounds the column on the grid the quantizer has already chosen (the weight
observer's per-output-channel symmetric scales, int8 or int4), and moves what that rounding lost onto the columns
not yet rounded, in proportion to how the layer's calibration inputs correlate them: the Hessian H = 2 X^T X of
the layer's squared output error (X the inputs as the quantized model sees them, im2col rows for a convolution),
through the upper Cholesky factor of H^-1, with 1 % of H's mean diagonal added to it (damping) for a well-posed
inverse. The layers go in graph order, each with the inputs that the layers before it, already rounded, give it,
and each aims at the fp32 model's output there: GPTQ rounds W' = W X_f^T X_q (X_q^T X_q)^-1, the float weights
that best map the quantized inputs X_q to the fp32 model's W X_f, so that a layer also takes out what the ones
before it left (as far as its inputs let it). Under bias correction, which removes each channel's mean output
error afterwards, the sums are taken about the inputs' means. A layer keeps nearest rounding unless GPTQ, fitted
on the even calibration samples, leaves the odd ones less error than nearest rounding, and the other way round:
with few samples for a layer's columns GPTQ fits their noise.

Only the weight values change, to codes times the observer's own scales, which ``convert_pt2e`` quantizes back to
exactly those codes: the integer reference, the generated C and the program files read the same int8 weights.
Convolutions (grouped and depthwise ones group by group) and linear layers are rounded so. An LSTM's or GRU's
two matrices, which no observer quantizes (their lowering, mcu/passes/quantized/recurrent.py, rounds them per
gate row to the row's largest magnitude over 127), are rounded side by side on that grid, a step per weight,
from each step's input beside the previous hidden state (a sample gives as many rows as it has steps); their
float values become the codes times those scales, every row's codes reaching 127 so that the lowering's rounding
gives back exactly those codes (a row GPTQ would leave short of it keeps nearest rounding). An nn.GRUCell stepped
in a loop (one op per step, all reading the same matrices) is rounded once, at its last step, from the rows
of every step, and a weight several linear layers read (a cell's gate layers, every step of its loop, when its
gates are ops: LSTMCell and RNNCell loops) once, at the last of them, from all their inputs.
Transposed convolutions keep nearest rounding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from mcu.capture.recurrent import GRU_CELL, WEIGHT_ARG
from mcu.quantize.bias_correction import (RECURRENT, TwinWalk, attr_value, fake_quantize, is_observer,
                                          own_matrices, recurrent_matrices, rounded_rows, set_attr_value)
from mcu.reference.recurrent import symmetric_rows

aten = torch.ops.aten

CONVOLUTIONS = {aten.conv1d.default: 1, aten.conv2d.default: 2, aten.conv1d.padding: 1, aten.conv2d.padding: 2}
LINEAR = aten.linear.default
DAMPING = 0.01  # of the Hessian's mean diagonal
# of the same, for the least-squares target: small, as a damping that shrinks the weights by 1 % would move
# them by more than an int8 step
RIDGE = 1e-5


@dataclass(frozen=True)
class Rounded:
    """One layer rounded by GPTQ: ``layer`` the graph node's name, ``nearest`` and ``gptq`` its output error
    sum((W X - Q X)^2) over the calibration inputs with nearest and with the rounding it got; ``weight`` the
    get_attr target that now holds the rounded values, ``original`` the float weights it held (the fp32 model,
    which bias correction measures against)."""

    layer: str
    nearest: float
    gptq: float  # (equal to nearest where the layer keeps nearest rounding)
    weight: str
    original: torch.Tensor = field(repr=False)


def _pair(value: Any, rank: int) -> list[int]:
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)] * rank


def input_columns(x: torch.Tensor, layer: Node, weight: torch.Tensor) -> list[torch.Tensor]:
    """The layer's input as rows of what each output value reads, one matrix per group: [positions, in/groups
    * kernel] (the order of ``weight.reshape(out, -1)``'s columns)."""
    if layer.target is LINEAR:
        return [x.double().reshape(-1, x.shape[-1])]
    rank = CONVOLUTIONS[layer.target]
    args = list(layer.args) + [None] * (7 - len(layer.args))
    stride = _pair(args[3] if args[3] is not None else 1, rank)
    padding, dilation = args[4] if args[4] is not None else 0, _pair(args[5] if args[5] is not None else 1, rank)
    groups = int(args[6]) if args[6] is not None else 1
    kernel = list(weight.shape[2:])
    if x.dim() == rank + 1:  # unbatched
        x = x.unsqueeze(0)
    if isinstance(padding, str):  # "same": as torch pads, the odd element after; "valid": none
        total = [d * (k - 1) if padding == "same" else 0 for d, k in zip(dilation, kernel)]
        pads = [p for t in reversed(total) for p in (t // 2, t - t // 2)]
        x, padding = F.pad(x, pads), 0
    padding = _pair(padding, rank)
    if rank == 1:  # as a 2-D image one row high
        x, kernel, stride, padding, dilation = x.unsqueeze(2), [1, *kernel], [1, *stride], [0, *padding], \
            [1, *dilation]
    cols = F.unfold(x.double(), kernel, dilation=dilation, padding=padding, stride=stride)  # [n, c*k, positions]
    cols = cols.transpose(1, 2).reshape(-1, cols.shape[1])
    per_group = cols.shape[1] // groups
    return [cols[:, g * per_group:(g + 1) * per_group] for g in range(groups)]


def gptq_round(weight: torch.Tensor, hessian: torch.Tensor, scale: torch.Tensor, quant_min: int, quant_max: int,
               damping: float = DAMPING) -> torch.Tensor:
    """The codes (as floats) of ``weight`` [out, columns] on the grid ``scale`` [out] (symmetric, zero point 0,
    clamped to [quant_min, quant_max]), or [out, columns] (a step per weight: a recurrent layer's two matrices side
    by side, each with its gate rows' scales), rounded column by column with each column's error spread over the
    later ones through ``hessian`` [columns, columns]."""
    w = weight.double().clone()
    h = hessian.double().clone()
    grid = scale.double()
    grid = grid[:, None].expand(-1, w.shape[1]) if grid.dim() == 1 else grid
    dead = torch.diagonal(h) == 0  # an input that is always 0: its weights cannot matter, nor carry error
    h[dead, dead] = 1.0
    h += torch.eye(h.shape[0], dtype=h.dtype) * damping * float(torch.diagonal(h).mean())
    try:
        inverse = torch.cholesky_inverse(torch.linalg.cholesky(h))
        factor = torch.linalg.cholesky(inverse, upper=True)
    except RuntimeError:  # not positive definite even damped: nearest rounding
        return torch.clamp(torch.round(w * (1.0 / grid)), quant_min, quant_max)
    inv_grid = 1.0 / grid
    codes = torch.empty_like(w)
    for i in range(w.shape[1]):
        column = w[:, i]
        q = torch.clamp(torch.round(column * inv_grid[:, i]), quant_min, quant_max)
        codes[:, i] = q
        error = (column - q * grid[:, i]) / factor[i, i]
        w[:, i + 1:] -= error[:, None] * factor[i, i + 1:][None, :]
    return codes


def weight_observer(gm: GraphModule, modules: dict[str, Any], layer: Node,
                    shared: bool = False) -> tuple[Node, Node, Any] | None:
    """The layer's weight as (get_attr, observer node, observer) when it is a constant of its own (``shared``: or
    of several layers) behind a per-channel symmetric observer on output channels (axis 0)."""
    w = layer.args[1] if len(layer.args) > 1 else None
    if not isinstance(w, Node) or w.op != "call_module" or (len(w.users) != 1 and not shared):
        return None
    observer = modules.get(str(w.target))
    source = w.args[0] if w.args else None
    if not is_observer(observer) or not isinstance(source, Node) or source.op != "get_attr" or \
            (len(source.users) != 1 and not shared):
        return None
    if observer.qscheme is not torch.per_channel_symmetric or int(observer.ch_axis) != 0:
        return None
    return source, w, observer


def round_weights(gm: GraphModule, calibration: Sequence[tuple[torch.Tensor, ...]],
                  centered: bool = False, float_weights: dict[str, torch.Tensor] | None = None,
                  recurrent_only: bool = False) -> list[Rounded]:
    """Round, in place, the weights of every convolution, linear and recurrent layer of the calibrated pt2e model
    ``gm`` (prepare_pt2e's result, its observers run over ``calibration``) by GPTQ onto their grids (the observers';
    a recurrent layer's, per gate row, its lowering's); returns each layer's output error before and after.
    ``centered``: the biases are corrected afterwards (mcu/quantize/bias_correction.py), which takes out each
    channel's mean output error: the statistics are then the inputs' covariances, their means taken out, so that
    GPTQ spends its columns on the error that is left. ``float_weights``: by get_attr target, the fp32 values of
    weights the graph holds rounded already; ``recurrent_only``: only the recurrent layers."""
    samples = [tuple(batch) for batch in calibration]
    if not samples or (recurrent_only and not any(n.target in RECURRENT for n in gm.graph.nodes)):
        return []
    # the quantized model (observers quantize, weights rounded as far as done) and the fp32 one beside it
    walk = TwinWalk(gm, samples, dict(float_weights or {}))
    done: list[Rounded] = []
    cells = _CellSteps(walk.nodes)
    shared = _SharedLinears(walk.nodes, walk.modules)
    with torch.no_grad():
        for i, node in enumerate(walk.nodes):
            if node.op == "output":
                break
            if node in cells.last and node in walk.varying:  # an nn.GRUCell's steps, rounded at the last one
                for rounded in _round_recurrent(gm, node, walk.quant, walk.fp32, centered, walk.originals,
                                                cells.add(node, walk.quant, walk.fp32)):
                    walk.originals[rounded.weight] = rounded.original
                    done.append(rounded)
            elif node in cells.steps and node in walk.varying:
                cells.add(node, walk.quant, walk.fp32)
            if node in shared.layers and node in walk.varying and not recurrent_only:
                # a cell's gate layer, its weight read at every step: rounded once, at the last
                gathered = shared.add(node, walk.quant, walk.fp32)
                rounded = _round_layer(gm, walk.modules, node, walk.quant, walk.fp32, centered,
                                       (gathered, shared.observers(node))) if node in shared.last else None
                if rounded is not None:
                    walk.originals[rounded.weight] = rounded.original
                    done.append(rounded)
            elif node.op == "call_function" and (node.target in CONVOLUTIONS or node.target is LINEAR) \
                    and node in walk.varying and not recurrent_only:
                rounded = _round_layer(gm, walk.modules, node, walk.quant, walk.fp32, centered)
                if rounded is not None:
                    walk.originals[rounded.weight] = rounded.original
                    done.append(rounded)
            elif node.op == "call_function" and node.target in RECURRENT and node in walk.varying:
                for rounded in _round_recurrent(gm, node, walk.quant, walk.fp32, centered, walk.originals):
                    walk.originals[rounded.weight] = rounded.original
                    done.append(rounded)
            walk.step(node)
            walk.release(i, node)
    gm.recompile()
    return done


@dataclass
class _Moments:
    """Sums over input rows of one group: X_q^T X_q, X_f^T X_q, X_f^T X_f, X_q, X_f and the count."""

    qq: torch.Tensor
    fq: torch.Tensor
    ff: torch.Tensor
    q: torch.Tensor
    f: torch.Tensor
    n: int = 0

    @staticmethod
    def zeros(width: int) -> "_Moments":
        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, dtype=torch.float64)
        return _Moments(z(width, width), z(width, width), z(width, width), z(width), z(width))

    def add(self, xq: torch.Tensor, xf: torch.Tensor) -> None:
        self.qq += xq.T @ xq
        self.fq += xf.T @ xq
        self.ff += xf.T @ xf
        self.q += xq.sum(dim=0)
        self.f += xf.sum(dim=0)
        self.n += xq.shape[0]

    def plus(self, other: "_Moments") -> "_Moments":
        return _Moments(self.qq + other.qq, self.fq + other.fq, self.ff + other.ff, self.q + other.q,
                        self.f + other.f, self.n + other.n)

    def second(self, centered: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(qq, fq, ff), their means' products taken out when ``centered``."""
        if not centered or self.n == 0:
            return self.qq, self.fq, self.ff
        n = float(self.n)
        return (self.qq - torch.outer(self.q, self.q) / n, self.fq - torch.outer(self.f, self.q) / n,
                self.ff - torch.outer(self.f, self.f) / n)


@dataclass(frozen=True)
class _Grid:
    """A layer's float weights [out, columns] in groups of ``per_group`` rows, and their grid: ``scale`` [out] or
    [out, columns], codes on [qmin, qmax]."""

    matrix: torch.Tensor
    scale: torch.Tensor
    per_group: int
    qmin: int
    qmax: int

    def steps(self, rows: slice) -> torch.Tensor:
        scale = self.scale[rows]
        return scale if scale.dim() == 2 else scale[:, None].expand(-1, self.matrix.shape[1])

    def nearest(self) -> torch.Tensor:
        return torch.clamp(torch.round(self.matrix * (1.0 / self.steps(slice(None)))), self.qmin, self.qmax)

    def fit(self, moments: list[_Moments], centered: bool) -> torch.Tensor:
        """GPTQ around the float weights that best map the quantized inputs to the fp32 model's outputs,
        W' = W C_fq H_qq^-1 (damped): the layer also takes out what the layers before it left."""
        codes = torch.empty_like(self.matrix)
        width = self.matrix.shape[1]
        for g, m in enumerate(moments):
            qq, fq, _ = m.second(centered)
            rows = slice(g * self.per_group, (g + 1) * self.per_group)
            damped = qq + torch.eye(width, dtype=qq.dtype) * RIDGE * float(torch.diagonal(qq).mean() + 1e-30)
            try:
                target = torch.linalg.solve(damped, (self.matrix[rows] @ fq).T).T
            except RuntimeError:
                target = self.matrix[rows]
            codes[rows] = gptq_round(target, 2.0 * qq, self.scale[rows], self.qmin, self.qmax)
        return codes

    def loss(self, codes: torch.Tensor, moments: list[_Moments], centered: bool) -> float:
        """sum((W X_f - Q X_q)^2) over the inputs of ``moments``."""
        total = 0.0
        for g, m in enumerate(moments):
            qq, fq, ff = m.second(centered)
            rows = slice(g * self.per_group, (g + 1) * self.per_group)
            w = self.matrix[rows]
            q = codes[rows] * self.steps(rows)
            total += float(torch.einsum("oi,ij,oj->", w, ff, w) - 2.0 * torch.einsum("oi,ij,oj->", w, fq, q)
                           + torch.einsum("oi,ij,oj->", q, qq, q))
        return total

    def choose(self, halves: list[list[_Moments]], centered: bool) -> tuple[torch.Tensor, float, float]:
        """GPTQ's codes, or nearest rounding where GPTQ does not generalize, and the error before and after.

        GPTQ fits the calibration inputs: with few of them for the layer's columns it also fits their noise, and
        other inputs then see more error than nearest rounding leaves. Fitted on each half, it must leave the
        other half less error, else the layer keeps nearest rounding."""
        whole = [a.plus(b) for a, b in zip(*halves)]
        nearest = self.nearest()
        before = self.loss(nearest, whole, centered)
        if any(m.n == 0 for m in halves[1]):  # one calibration sample: nothing to hold out
            return nearest, before, before
        held_out = self.loss(self.fit(halves[0], centered), halves[1], centered) \
            + self.loss(self.fit(halves[1], centered), halves[0], centered)
        if held_out < self.loss(nearest, halves[0], centered) + self.loss(nearest, halves[1], centered):
            codes = self.fit(whole, centered)
            return codes, before, self.loss(codes, whole, centered)
        return nearest, before, before


def _round_layer(gm: GraphModule, modules: dict[str, Any], layer: Node, quant: list[dict[Node, Any]],
                 fp32: list[dict[Node, Any]], centered: bool,
                 shared: tuple[list[list[_Moments]], list[Node]] | None = None) -> Rounded | None:
    """GPTQ on one layer from its inputs in ``quant`` and ``fp32``; its weight and its observer's value in
    ``quant`` replaced. ``shared``: a weight several linear layers read (:class:`_SharedLinears`), their input
    sums gathered and their weight observers."""
    found = weight_observer(gm, modules, layer, shared=shared is not None)
    x_node = layer.args[0]
    if found is None or not isinstance(x_node, Node):
        return None
    source, observed, observer = found
    weight = attr_value(gm, str(source.target))
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point():
        return None
    scale, _ = observer.calculate_qparams()
    scale = scale.double()
    out = weight.shape[0]
    groups = int(layer.args[6]) if layer.target is not LINEAR and len(layer.args) > 6 else 1
    grid = _Grid(weight.detach().double().reshape(out, -1), scale, out // groups, int(observer.quant_min),
                 int(observer.quant_max))
    width = grid.matrix.shape[1]
    # the even and the odd calibration samples' sums, each half the other's held-out data
    if shared is None:
        halves = [[_Moments.zeros(width) for _ in range(groups)] for _ in range(2)]
        for k, (q_env, f_env) in enumerate(zip(quant, fp32)):
            for g, (xq, xf) in enumerate(zip(input_columns(q_env[x_node], layer, weight),
                                             input_columns(f_env[x_node], layer, weight))):
                halves[k % 2][g].add(xq, xf)
    else:
        halves = shared[0]
    codes, before, after = grid.choose(halves, centered)
    # codes times the observer's float32 scales: convert_pt2e's quantize gives back exactly these codes
    new = (codes.to(weight.dtype) * scale.to(weight.dtype)[:, None]).reshape(weight.shape)
    set_attr_value(gm, str(source.target), new.detach())
    value = fake_quantize(observer, new)
    for env in quant:
        env[source] = new
        for o in ([observed] if shared is None else shared[1]):
            env[o] = value
    return Rounded(layer.name, before, after, str(source.target), weight)


def recurrent_rows(layer: Node, env: dict[Node, Any], matrices: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """One sample's rows of what a recurrent layer's two matrices read: [batch * steps, input + hidden], each
    step's input beside the hidden state before it (at the first step the given initial state, or zeros), the
    hidden states from the layer run on the input in ``env`` with ``matrices`` (w_ih, w_hh)."""
    args = [env[a] if isinstance(a, Node) else a for a in layer.args]
    x, first = args[0], WEIGHT_ARG[layer.target]
    h = layer.target(*args[:first], *matrices, *args[first + 2:]).double()  # type: ignore[operator]
    initial = args[1].double()[:, None] if first > 1 else torch.zeros_like(h[:, :1])
    before = torch.cat([initial, h[:, :-1]], dim=1)
    return torch.cat([x.double(), before], dim=2).reshape(-1, x.shape[-1] + h.shape[-1])


class _SharedLinears:
    """The linear layers that read one weight (a recurrent cell's gate layers at every step of its loop,
    mcu/quantize/cells.py), through one observer or one each: their input rows gathered layer by layer, so that the
    weight is rounded once, at the last of them, from all of them. The observers saw the same weight, so they hold
    one grid; a weight whose observers disagree, or that anything else reads, is left out."""

    def __init__(self, nodes: list[Node], modules: dict[str, Any]) -> None:
        readers: dict[Node, list[Node]] = {}
        for node in nodes:
            w = node.args[1] if node.op == "call_function" and node.target is LINEAR and len(node.args) > 1 else None
            if isinstance(w, Node) and w.op == "call_module" and w.args and isinstance(w.args[0], Node) and \
                    w.args[0].op == "get_attr" and is_observer(modules.get(str(w.target))):
                readers.setdefault(w.args[0], []).append(node)

        def only_these(src: Node, group: list[Node]) -> bool:
            return all(o.op == "call_module" and all(u in group and u.args[1] is o for u in o.users) for o in src.users)

        groups = [g for src, g in readers.items() if len(g) > 1 and only_these(src, g) and
                  len({_qparams(modules[str(n.args[1].target)]) for n in g}) == 1]
        self.layers = {n for g in groups for n in g}
        self.last = {g[-1] for g in groups}
        self._group = {n: tuple(g) for g in groups for n in g}
        self._halves: dict[tuple[Node, ...], list[list[_Moments]]] = {}

    def observers(self, layer: Node) -> list[Node]:
        return list(dict.fromkeys(n.args[1] for n in self._group[layer]))

    def add(self, layer: Node, quant: list[dict[Node, Any]], fp32: list[dict[Node, Any]]) -> list[list[_Moments]]:
        """The layer's input rows added to its group's even and odd samples' sums; returns them."""
        x = layer.args[0]
        width = int(quant[0][x].shape[-1])
        halves = self._halves.setdefault(self._group[layer], [[_Moments.zeros(width)] for _ in range(2)])
        for k, (q_env, f_env) in enumerate(zip(quant, fp32)):
            halves[k % 2][0].add(q_env[x].double().reshape(-1, width), f_env[x].double().reshape(-1, width))
        return halves


def _qparams(observer: Any) -> tuple:
    scale, _ = observer.calculate_qparams()
    return tuple(float(v) for v in scale.reshape(-1))


class _CellSteps:
    """The steps of each nn.GRUCell stepped in a loop (one ``mcu_rnn::gru_cell`` op per call, every call reading
    the same two weight matrices): their rows of what the matrices read, gathered step by step, so that the
    weights are rounded once, at the last step, from all of them."""

    def __init__(self, nodes: list[Node]) -> None:
        groups: dict[tuple[Node, ...], list[Node]] = {}
        for node in nodes:
            if node.op == "call_function" and node.target is GRU_CELL:
                sources = recurrent_matrices(node)
                if all(isinstance(m, Node) for m in sources):
                    groups.setdefault(tuple(sources), []).append(node)  # type: ignore[arg-type]
        self.steps = {n for group in groups.values() for n in group}
        self.last = {group[-1] for group in groups.values()}
        self.key = {n: key for key, group in groups.items() for n in group}
        self.halves: dict[tuple[Node, ...], list[list[_Moments]]] = {}

    def add(self, step: Node, quant: list[dict[Node, Any]], fp32: list[dict[Node, Any]]) -> list[list[_Moments]]:
        """The step's rows (its input beside the state it reads) added to its cell's even and odd samples' sums;
        returns them."""
        halves = self.halves.get(self.key[step])
        for k, (q_env, f_env) in enumerate(zip(quant, fp32)):
            xq, xf = (torch.cat([env[step.args[0]], env[step.args[1]]], dim=1).double() for env in (q_env, f_env))
            if halves is None:
                halves = self.halves[self.key[step]] = [[_Moments.zeros(xq.shape[1])] for _ in range(2)]
            halves[k % 2][0].add(xq, xf)
        return halves or [[_Moments.zeros(0)] for _ in range(2)]


def _round_recurrent(gm: GraphModule, layer: Node, quant: list[dict[Node, Any]], fp32: list[dict[Node, Any]],
                     centered: bool, originals: dict[str, torch.Tensor],
                     gathered: list[list[_Moments]] | None = None) -> list[Rounded]:
    """GPTQ on an LSTM's or GRU's two matrices side by side, on the int8 grid its lowering rounds them to (per
    gate row, the row's largest magnitude over 127), from the step inputs and previous hidden states in ``quant``
    and ``fp32`` (``gathered``: their sums over an nn.GRUCell's steps, :class:`_CellSteps`). The graph's weights
    become the codes times those scales; a row whose codes would no longer reach 127 (so that the lowering would
    choose a finer scale and other codes) keeps nearest rounding. ``originals``: the fp32 values of weights the
    graph holds on a searched grid already (mcu/quantize/weight_scales.py)."""
    sources = recurrent_matrices(layer)
    # (a cell's matrices are read by every step)
    if not (own_matrices(layer) if gathered is None else
            all(isinstance(s, Node) and s.op == "get_attr" and all(u.target is GRU_CELL for u in s.users)
                for s in sources)):
        return []
    held = [attr_value(gm, str(s.target)) for s in sources]  # type: ignore[union-attr]
    if not all(isinstance(w, torch.Tensor) and w.is_floating_point() and w.dim() == 2 for w in held):
        return []
    weights = [originals.get(str(s.target), w) for s, w in zip(sources, held)]  # type: ignore[union-attr]
    mats = [w.detach().double() for w in weights]
    n_in = mats[0].shape[1]
    rows = [symmetric_rows(w.detach().double().numpy()) for w in held]  # the grid the lowering will take
    scale = torch.cat([torch.from_numpy(s)[:, None].expand(-1, m.shape[1]) for (_, s), m in zip(rows, mats)], dim=1)
    grid = _Grid(torch.cat(mats, dim=1), scale, mats[0].shape[0], -127, 127)
    rounded = tuple(rounded_rows(w) for w in held)
    halves = gathered
    if halves is None:
        halves = [[_Moments.zeros(grid.matrix.shape[1])] for _ in range(2)]
        for k, (q_env, f_env) in enumerate(zip(quant, fp32)):
            halves[k % 2][0].add(recurrent_rows(layer, q_env, rounded),
                                 recurrent_rows(layer, f_env, tuple(weights)))
    elif halves[0][0].q.shape[0] != grid.matrix.shape[1]:
        return []
    codes, before, after = grid.choose(halves, centered)
    nearest = grid.nearest()
    for block in (slice(0, n_in), slice(n_in, None)):
        short = codes[:, block].abs().amax(dim=1) < 127
        codes[short] = nearest[short]
    after = grid.loss(codes, [a.plus(b) for a, b in zip(*halves)], centered)
    new = []
    for w, (_, s), block in zip(weights, rows, (slice(0, n_in), slice(n_in, None))):
        value = (codes[:, block] * torch.from_numpy(s)[:, None]).to(w.dtype)
        again, _ = symmetric_rows(value.double().numpy())
        if not np.array_equal(again, codes[:, block].numpy()):  # (cannot happen: every row reaches 127)
            raise AssertionError(f"{layer.name}: GPTQ's recurrent codes do not round back to themselves")
        new.append(value)
    for source, value in zip(sources, new):
        set_attr_value(gm, str(source.target), value)  # type: ignore[union-attr]
        for env in quant:
            env[source] = value
    return [Rounded(layer.name, before, after, str(s.target), w)  # type: ignore[union-attr]
            for s, w in zip(sources, weights)]
