"""Bias correction (Nagel et al. 2019, "Data-Free Quantization Through Weight Equalization and Bias Correction",
its empirical variant) on a calibrated pt2e model, before ``convert_pt2e`` freezes it.

Rounding a layer's weights moves its output, and over a whole model most of that move is a constant: the
rounded weights applied to the inputs' mean. Each convolution (depthwise and transposed ones too) and linear
layer gets, added to its float bias, the mean over the calibration data of the difference between the fp32
model's output at that layer and the quantized model's output there, per output channel. The layers are
taken in graph order over the whole calibration set, so that each one is corrected for the quantized model
as it runs with every layer before it already corrected.

The quantized model is simulated on the prepared graph itself: every observer, which the calibration has
already run, quantizes and dequantizes what passes it with the parameters it will give ``convert_pt2e``
(the same ``quantized_decomposed`` ops the converted graph runs), weights included, and a recurrent layer reads
its matrices rounded per gate row as its lowering will round them; the fp32 model is the same graph with the
observers passing values through. Only the biases change: the lowering then quantizes
them to int32 (int64 at 16 bits) as any bias, so the integer reference, the generated C and the program
files all read the corrected ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

from mcu.capture.recurrent import FINAL_CELL, GRU_FROM, LSTM_FROM, OPS, WEIGHT_ARG
from mcu.reference.recurrent import symmetric_rows

aten = torch.ops.aten
# whole LSTM and GRU layers, from the zero state or given ones: (x, [states,] w_ih, w_hh, b_ih, b_hh, state_shift)
RECURRENT = {*OPS.values(), GRU_FROM, LSTM_FROM}


def recurrent_matrices(layer: Node) -> tuple[object, object]:
    """The arguments of a recurrent layer's op (of RECURRENT) that hold its two weight matrices, w_ih and w_hh."""
    first = WEIGHT_ARG[layer.target]
    return layer.args[first], layer.args[first + 1]


def own_matrices(layer: Node) -> bool:
    """Whether the layer's two matrices are parameters it alone reads (besides its final cell's op, nn.LSTM's c_n,
    which runs the layer's weights again), so that rounding them changes no other layer."""
    def of_layer(u: Node) -> bool:  # (the hidden states it reads: the layer's output, or its observer's)
        y = u.args[5]
        return u.target is FINAL_CELL and isinstance(y, Node) and (y is layer or y.op == "call_module" and
                                                                   bool(y.args) and y.args[0] is layer)

    return all(isinstance(s, Node) and s.op == "get_attr" and all(u is layer or of_layer(u) for u in s.users)
               for s in recurrent_matrices(layer))

# output channels on axis 1 (convolutions, NC...) or last (linear)
CHANNEL_AXIS = {aten.conv1d.default: 1, aten.conv2d.default: 1, aten.conv1d.padding: 1, aten.conv2d.padding: 1,
                aten.conv_transpose1d.default: 1, aten.conv_transpose2d.input: 1, aten.linear.default: -1}


@dataclass(frozen=True)
class Correction:
    """What one layer's bias gained: ``layer`` the graph node's name, ``shift`` the largest absolute change of a
    channel (the largest mean output error of a channel over the calibration data before it)."""

    layer: str
    shift: float


def is_observer(module: Any) -> bool:
    return hasattr(module, "calculate_qparams") and hasattr(module, "quant_min") and hasattr(module, "dtype")


def fake_quantize(observer: Any, x: torch.Tensor) -> torch.Tensor:
    """``x`` quantized and dequantized as ``convert_pt2e`` will do at this observer."""
    if not x.is_floating_point():
        return x
    scale, zero_point = observer.calculate_qparams()
    qmin, qmax, dtype = int(observer.quant_min), int(observer.quant_max), observer.dtype
    qd = torch.ops.quantized_decomposed
    if observer.qscheme in (torch.per_channel_symmetric, torch.per_channel_affine):
        axis = int(observer.ch_axis)
        q = qd.quantize_per_channel(x, scale, zero_point, axis, qmin, qmax, dtype)
        return qd.dequantize_per_channel(q, scale, zero_point, axis, qmin, qmax, dtype, out_dtype=x.dtype)
    s, z = float(scale.reshape(-1)[0]), int(zero_point.reshape(-1)[0])
    q = qd.quantize_per_tensor(x, s, z, qmin, qmax, dtype)
    return qd.dequantize_per_tensor(q, s, z, qmin, qmax, dtype, out_dtype=x.dtype)


def rounded_rows(w: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """A recurrent layer's matrix as its lowering will round it, per gate row to int8 (``bits`` 4: w4a8's
    [-7, 7]; no observer of the graph does: mcu/passes/quantized/recurrent.py quantizes them), dequantized."""
    codes, scale = symmetric_rows(w.detach().double().numpy(), bits=bits)
    return torch.from_numpy(codes.astype(np.float64) * scale[:, None]).to(w.dtype)


def attr_value(gm: GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class TwinWalk:
    """The prepared graph run node by node over the calibration samples twice, as fp32 (observers pass values
    through, weights rounded already read as their ``originals``) and as the quantized model (observers quantize
    and dequantize with the parameters they give the conversion), each node's values kept until its last use.
    Nodes that do not depend on the inputs (weights) are computed once for every sample."""

    gm: GraphModule
    samples: list[tuple]
    originals: dict[str, torch.Tensor]
    recurrent_bits: int = 8  # the width the recurrent layers' matrices are lowered to
    modules: dict[str, Any] = field(init=False)
    nodes: list[Node] = field(init=False)
    inputs: dict[Node, int] = field(init=False)
    last_use: dict[Node, int] = field(init=False)
    varying: set[Node] = field(init=False)
    fp32: list[dict[Node, Any]] = field(init=False)
    quant: list[dict[Node, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.modules = dict(self.gm.named_modules(remove_duplicate=False))  # (a shared observer has two names)
        self.nodes = list(self.gm.graph.nodes)
        self.inputs = {n: i for i, n in enumerate(n for n in self.nodes if n.op == "placeholder")}
        self.last_use, self.varying = {}, set()
        for i, node in enumerate(self.nodes):
            for arg in node.all_input_nodes:
                self.last_use[arg] = i
            if node.op == "placeholder" or any(a in self.varying for a in node.all_input_nodes):
                self.varying.add(node)
        self.fp32 = [{} for _ in self.samples]
        self.quant = [{} for _ in self.samples]

    def run(self, node: Node, env: dict[Node, Any], sample: tuple, observe: bool) -> Any:
        """``node`` on one sample, its arguments from ``env``; ``observe``: as the quantized model."""
        args = map_arg(node.args, lambda a: env[a])
        kwargs = map_arg(node.kwargs, lambda a: env[a])
        if node.op == "placeholder":
            return sample[self.inputs[node]]
        if node.op == "get_attr":
            if not observe and str(node.target) in self.originals:
                return self.originals[str(node.target)]
            return attr_value(self.gm, str(node.target))
        if node.op == "call_module":
            module = self.modules[str(node.target)]
            if is_observer(module):
                return fake_quantize(module, args[0]) if observe else args[0]
            return module(*args, **kwargs)
        if node.op == "call_method":
            return getattr(args[0], str(node.target))(*args[1:], **kwargs)
        if node.op == "call_function":
            if observe and node.target in RECURRENT:
                first = WEIGHT_ARG[node.target]
                args = (*args[:first], *(rounded_rows(w, self.recurrent_bits) for w in args[first:first + 2]), *args[first + 2:])
            return node.target(*args, **kwargs)  # type: ignore[operator]
        return None

    def step(self, node: Node) -> None:
        """``node``'s values on every sample, fp32 and quantized."""
        if node in self.varying:
            for sample, f_env, q_env in zip(self.samples, self.fp32, self.quant):
                f_env[node] = self.run(node, f_env, sample, observe=False)
                q_env[node] = self.run(node, q_env, sample, observe=True)
            return
        f_value = self.run(node, self.fp32[0], self.samples[0], False)
        q_value = self.run(node, self.quant[0], self.samples[0], True)
        for f_env, q_env in zip(self.fp32, self.quant):
            f_env[node], q_env[node] = f_value, q_value

    def release(self, i: int, node: Node) -> None:
        """Drop the values whose last use is ``node``, the ``i``-th node."""
        dead = [a for a in node.all_input_nodes if self.last_use.get(a, i) == i]
        for env in (*self.fp32, *self.quant):
            for arg in dead:
                env.pop(arg, None)


def set_attr_value(gm: GraphModule, target: str, value: torch.Tensor) -> None:
    owner, _, name = target.rpartition(".")
    module = attr_value(gm, owner) if owner else gm
    if isinstance(getattr(module, name), torch.nn.Parameter):
        value = torch.nn.Parameter(value, requires_grad=False)
    setattr(module, name, value)


def _channel_mean(y: list[torch.Tensor], axis: int) -> torch.Tensor:
    """The mean over every sample and position of each output channel, in float64."""
    flat = [t.double().movedim(axis, -1).reshape(-1, t.shape[axis]) for t in y]
    return torch.cat(flat).mean(dim=0)


def _bias_node(gm: GraphModule, layer: Node, channels: int, dtype: torch.dtype) -> Node | None:
    """The layer's bias as a get_attr of its own, made (zeros) when it has none; None when it is shared or
    computed."""
    args = list(layer.args)
    bias = args[2] if len(args) > 2 else layer.kwargs.get("bias")
    if isinstance(bias, Node):
        return bias if bias.op == "get_attr" and len(bias.users) == 1 else None
    if bias is not None or "bias" in layer.kwargs:
        return None
    name = f"_mcu_corrected_bias_{layer.name}"
    gm.register_buffer(name, torch.zeros(channels, dtype=dtype))
    with gm.graph.inserting_before(layer):
        node = gm.graph.get_attr(name)
    layer.args = (*args[:2], node, *args[3:]) if len(args) > 2 else (*args, node)
    return node


def _writes_state(node: Node, varying: set[Node]) -> bool:
    """An in-place op on a tensor the inputs do not make: a buffer the model keeps between calls (a KV cache).
    The two runs would write it in turn, each reading the other's values: such a model keeps its biases."""
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    target = node.args[0] if node.args else None
    return bool(getattr(schema, "is_mutable", False)) and isinstance(target, Node) and target not in varying


def correct_biases(gm: GraphModule, calibration: Sequence[tuple[torch.Tensor, ...]],
                   float_weights: dict[str, torch.Tensor] | None = None, weight_bits: int = 8) -> list[Correction]:
    """Correct, in place, the float bias of every convolution and linear layer of the calibrated pt2e model
    ``gm`` (prepare_pt2e's result, its observers run over ``calibration``); returns what changed per layer
    (nothing for a model that writes its own buffers). ``float_weights``: by get_attr target, the fp32 model's
    values of weights that ``gm`` holds rounded already (mcu/quantize/gptq.py). ``weight_bits`` 4: the recurrent
    layers' matrices run on 4 bits (w4a8)."""
    originals = float_weights or {}
    samples = [tuple(batch) for batch in calibration]
    if not samples:
        return []
    walk = TwinWalk(gm, samples, originals, weight_bits)
    if any(_writes_state(node, walk.varying) for node in walk.nodes):
        return []
    done: list[Correction] = []
    with torch.no_grad():
        for i, node in enumerate(walk.nodes):
            if node.op == "output":
                break
            walk.step(node)
            axis = CHANNEL_AXIS.get(node.target) if node.op == "call_function" else None
            if axis is not None and node in walk.varying and isinstance(walk.quant[0][node], torch.Tensor):
                corrected = _correct_layer(gm, node, axis, walk.fp32, walk.quant)
                if corrected is not None:
                    done.append(corrected)
            walk.release(i, node)  # (a bias made above is no value of the walk's: nothing to drop)
    gm.recompile()
    return done


def _correct_layer(gm: GraphModule, layer: Node, axis: int, fp32: list[dict[Node, Any]],
                   quant: list[dict[Node, Any]]) -> Correction | None:
    """Add the layer's mean output error to its bias, and to the quantized model's output there."""
    got = [env[layer] for env in quant]
    error = _channel_mean([env[layer] for env in fp32], axis) - _channel_mean(got, axis)
    channels = int(error.numel())
    bias = _bias_node(gm, layer, channels, got[0].dtype)
    if bias is None:
        return None
    value = attr_value(gm, str(bias.target))
    if not isinstance(value, torch.Tensor) or value.numel() != channels:
        return None
    # a new tensor, not an in-place add: the exported graph may share its parameters with the user's model
    set_attr_value(gm, str(bias.target), value.detach() + error.to(value.dtype).reshape(value.shape))
    shape = [1] * got[0].dim()
    shape[axis] = channels
    step = error.to(got[0].dtype).reshape(shape)
    for env, y in zip(quant, got):
        env[layer] = y + step
    return Correction(layer.name, float(error.abs().max()))
