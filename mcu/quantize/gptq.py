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
Convolutions (grouped and depthwise ones group by group) and linear layers are rounded so; transposed
convolutions and the recurrent layers' matrices (quantized per gate row by their lowering,
mcu/passes/quantized/recurrent.py, not by an observer, so that GPTQ would need that lowering's grid here) keep
nearest rounding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node

from mcu.quantize.bias_correction import TwinWalk, attr_value, fake_quantize, is_observer, set_attr_value

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


def _columns(x: torch.Tensor, layer: Node, weight: torch.Tensor) -> list[torch.Tensor]:
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
    clamped to [quant_min, quant_max]), rounded column by column with each column's error spread over the later
    ones through ``hessian`` [columns, columns]."""
    w = weight.double().clone()
    h = hessian.double().clone()
    dead = torch.diagonal(h) == 0  # an input that is always 0: its weights cannot matter, nor carry error
    h[dead, dead] = 1.0
    h += torch.eye(h.shape[0], dtype=h.dtype) * damping * float(torch.diagonal(h).mean())
    try:
        inverse = torch.cholesky_inverse(torch.linalg.cholesky(h))
        factor = torch.linalg.cholesky(inverse, upper=True)
    except RuntimeError:  # not positive definite even damped: nearest rounding
        return torch.clamp(torch.round(w * (1.0 / scale.double())[:, None]), quant_min, quant_max)
    inv_scale = 1.0 / scale.double()
    codes = torch.empty_like(w)
    for i in range(w.shape[1]):
        column = w[:, i]
        q = torch.clamp(torch.round(column * inv_scale), quant_min, quant_max)
        codes[:, i] = q
        error = (column - q * scale.double()) / factor[i, i]
        w[:, i + 1:] -= error[:, None] * factor[i, i + 1:][None, :]
    return codes


def _weight_observer(gm: GraphModule, modules: dict[str, Any], layer: Node) -> tuple[Node, Node, Any] | None:
    """The layer's weight as (get_attr, observer node, observer) when it is a constant of its own behind a
    per-channel symmetric observer on output channels (axis 0)."""
    w = layer.args[1] if len(layer.args) > 1 else None
    if not isinstance(w, Node) or w.op != "call_module" or len(w.users) != 1:
        return None
    observer = modules.get(str(w.target))
    source = w.args[0] if w.args else None
    if not is_observer(observer) or not isinstance(source, Node) or source.op != "get_attr" or len(source.users) != 1:
        return None
    if observer.qscheme is not torch.per_channel_symmetric or int(observer.ch_axis) != 0:
        return None
    return source, w, observer


def round_weights(gm: GraphModule, calibration: Sequence[tuple[torch.Tensor, ...]],
                  centered: bool = False) -> list[Rounded]:
    """Round, in place, the weights of every convolution and linear layer of the calibrated pt2e model ``gm``
    (prepare_pt2e's result, its observers run over ``calibration``) by GPTQ onto their observers' grids; returns
    each layer's output error before and after. ``centered``: the biases are corrected afterwards
    (mcu/quantize/bias_correction.py), which takes out each channel's mean output error: the statistics are then
    the inputs' covariances, their means taken out, so that GPTQ spends its columns on the error that is left."""
    samples = [tuple(batch) for batch in calibration]
    if not samples:
        return []
    # the quantized model (observers quantize, weights rounded as far as done) and the fp32 one beside it
    walk = TwinWalk(gm, samples, {})
    done: list[Rounded] = []
    with torch.no_grad():
        for i, node in enumerate(walk.nodes):
            if node.op == "output":
                break
            if node.op == "call_function" and (node.target in CONVOLUTIONS or node.target is LINEAR) \
                    and node in walk.varying:
                rounded = _round_layer(gm, walk.modules, node, walk.quant, walk.fp32, centered)
                if rounded is not None:
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


def _round_layer(gm: GraphModule, modules: dict[str, Any], layer: Node, quant: list[dict[Node, Any]],
                 fp32: list[dict[Node, Any]], centered: bool) -> Rounded | None:
    """GPTQ on one layer from its inputs in ``quant`` and ``fp32``; its weight and its observer's value in
    ``quant`` replaced."""
    found = _weight_observer(gm, modules, layer)
    x_node = layer.args[0]
    if found is None or not isinstance(x_node, Node):
        return None
    source, observed, observer = found
    weight = attr_value(gm, str(source.target))
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point():
        return None
    scale, _ = observer.calculate_qparams()
    scale = scale.double()
    qmin, qmax = int(observer.quant_min), int(observer.quant_max)
    out = weight.shape[0]
    groups = int(layer.args[6]) if layer.target is not LINEAR and len(layer.args) > 6 else 1
    per_group = out // groups
    matrix = weight.detach().double().reshape(out, -1)
    width = matrix.shape[1]
    # the even and the odd calibration samples' sums, each half the other's held-out data
    halves = [[_Moments.zeros(width) for _ in range(groups)] for _ in range(2)]
    for k, (q_env, f_env) in enumerate(zip(quant, fp32)):
        for g, (xq, xf) in enumerate(zip(_columns(q_env[x_node], layer, weight),
                                         _columns(f_env[x_node], layer, weight))):
            halves[k % 2][g].add(xq, xf)
    whole = [a.plus(b) for a, b in zip(*halves)]
    nearest = torch.clamp(torch.round(matrix * (1.0 / scale)[:, None]), qmin, qmax)

    def fit(moments: list[_Moments]) -> torch.Tensor:
        """GPTQ around the float weights that best map the quantized inputs to the fp32 model's outputs,
        W' = W C_fq H_qq^-1 (damped): the layer also takes out what the layers before it left."""
        codes = torch.empty_like(matrix)
        for g, m in enumerate(moments):
            qq, fq, _ = m.second(centered)
            rows = slice(g * per_group, (g + 1) * per_group)
            damped = qq + torch.eye(width, dtype=qq.dtype) * RIDGE * float(torch.diagonal(qq).mean() + 1e-30)
            try:
                target = torch.linalg.solve(damped, (matrix[rows] @ fq).T).T
            except RuntimeError:
                target = matrix[rows]
            codes[rows] = gptq_round(target, 2.0 * qq, scale[rows], qmin, qmax)
        return codes

    def loss(codes: torch.Tensor, moments: list[_Moments]) -> float:
        """sum((W X_f - Q X_q)^2) over the inputs of ``moments``."""
        total = 0.0
        for g, m in enumerate(moments):
            qq, fq, ff = m.second(centered)
            w = matrix[g * per_group:(g + 1) * per_group]
            q = codes[g * per_group:(g + 1) * per_group] * scale[g * per_group:(g + 1) * per_group, None]
            total += float(torch.einsum("oi,ij,oj->", w, ff, w) - 2.0 * torch.einsum("oi,ij,oj->", w, fq, q)
                           + torch.einsum("oi,ij,oj->", q, qq, q))
        return total

    # GPTQ fits the calibration inputs: with few of them for the layer's columns it also fits their noise, and
    # other inputs then see more error than nearest rounding leaves. Fitted on each half, it must leave the
    # other half less error, else the layer keeps nearest rounding.
    before = after = loss(nearest, whole)
    codes = nearest
    if len(quant) >= 2:
        held_out = loss(fit(halves[0]), halves[1]) + loss(fit(halves[1]), halves[0])
        if held_out < loss(nearest, halves[0]) + loss(nearest, halves[1]):
            codes = fit(whole)
            after = loss(codes, whole)
    # codes times the observer's float32 scales: convert_pt2e's quantize gives back exactly these codes
    new = (codes.to(weight.dtype) * scale.to(weight.dtype)[:, None]).reshape(weight.shape)
    set_attr_value(gm, str(source.target), new.detach())
    value = fake_quantize(observer, new)
    for env in quant:
        env[source] = new
        env[observed] = value
    return Rounded(layer.name, before, after, str(source.target), weight)
