"""``MCUQuantizer``: annotate a captured graph for the CMSIS-NN int8 scheme (torchao pt2e).

Activations: int8 asymmetric per tensor, [-128, 127]. Weights of convolution
and linear layers: int8 symmetric per output channel, [-127, 127]. Biases stay
float here; the lowering quantizes them to int32 with scale s_in * s_w[c].

Patterns annotated as one unit, so nothing is quantized inside them:
``conv/linear [-> batch_norm] [-> relu/relu6/hardtanh/clamp]`` and
``add/mul [-> relu/...]``. Ops that cannot change quantization parameters
(max pooling, average pooling, reshapes, permutes, padding, concatenation,
a lone ReLU; upsampling, flips, repeats, index_select and gather, adaptive pooling to
any size but 1x1) share their input's parameters. Softmax and sigmoid outputs use
the fixed scale 1/256 and zero-point -128, tanh 1/128 and 0. Any op not named
here stays unannotated and runs in fp32 between dequantize and quantize. Before annotating, an
scaled_dot_product_attention (unmasked, or with a mask known at compile time) is written out op by op and chunk/split/unbind become one view
per part (mcu/quantize/attention.py), so that attention and a fused qkv projection quantize.
"""

from __future__ import annotations

import logging
from typing import Callable

import torch
from torch.fx import GraphModule, Node
from mcu.capture.recurrent import FINAL_CELL, GRU_CELL, GRU_FROM, LSTM_FROM, OPS
from mcu.quantize.attention import prepare_attention, runtime_mask_islands

# torchao's import logs that its CUDA extensions are missing (expected on a CPU build) and torch logs
# a deprecation about torchao's own pytree registration: neither is something a user can act on.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

from torchao.quantization.pt2e import (  # noqa: E402
    FakeQuantize,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    SharedQuantizationSpec,
)

aten = torch.ops.aten

CONV_LINEAR = {aten.conv2d.default, aten.linear.default, aten.conv1d.default,
               aten.conv1d.padding, aten.conv2d.padding}  # padding="same" / "valid"
# Transposed convolutions: weights [in, out/groups, k...], so their output channels are axis 1.
CONV_TRANSPOSE = {aten.conv_transpose1d.default, aten.conv_transpose2d.input}
BATCH_NORM = {aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default}
ACTIVATIONS = {aten.relu.default, aten.relu_.default, aten.hardtanh.default, aten.hardtanh_.default,
               aten.clamp.default, aten.relu6.default if hasattr(aten, "relu6") else aten.relu.default}
BINARY = {aten.add.Tensor, aten.mul.Tensor, aten.add_.Tensor, aten.mul_.Tensor,
          aten.sub.Tensor, aten.sub_.Tensor}  # (x - y of two tensors: int8, not an fp32 island)
SHARED = {aten.max_pool2d.default, aten.avg_pool2d.default, aten.flatten.using_ints, aten.view.default,
          aten.reshape.default, aten.permute.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
          aten.pad.default, aten.constant_pad_nd.default, aten.dropout.default, aten.contiguous.default,
          aten.clone.default, aten.slice.Tensor, aten.select.int,
          # attention's head views: q/k/v transposed and unflattened into heads (mcu/quantize/attention.py)
          aten.transpose.int, aten.t.default, aten.unflatten.int}
OWN_OUTPUT = {aten.adaptive_avg_pool2d.default, aten.mean.dim, aten.hardswish.default,
              aten.hardswish_.default}
SOFTMAX = {aten.softmax.int, aten._softmax.default}
# resampling and data movement: they move or average values of one tensor, so the output keeps
# the input's quantization (adaptive pooling to any size but 1x1, which is a mean with its own output)
MOVES = {aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default, aten.upsample_bilinear2d.vec,
         aten.upsample_bilinear2d.default, aten.repeat.default, aten.expand.default, aten.flip.default,
         aten.pixel_shuffle.default, aten.pixel_unshuffle.default, aten.index_select.default,
         aten.gather.default, aten.roll.default, aten.index.Tensor, aten._upsample_nearest_exact2d.vec,
         aten._upsample_nearest_exact2d.default, aten.upsample_nearest1d.vec, aten.upsample_nearest1d.default,
         aten.upsample_linear1d.vec, aten.upsample_linear1d.default}
STACK = {aten.stack.default}


def _global_pool(node: Node) -> bool:
    val = node.meta.get("val")
    rank = 1 if node.target is aten.adaptive_avg_pool1d.default else 2
    return isinstance(val, torch.Tensor) and tuple(val.shape[-rank:]) == (1,) * rank
FIXED_OUTPUT = {aten.sigmoid.default: (1.0 / 256.0, -128), aten.tanh.default: (1.0 / 128.0, 0),
                # TFLite's int8 LOG_SOFTMAX output, [-16, 0] (mcu_log_softmax_s8)
                aten.log_softmax.int: (16.0 / 256.0, 127), aten._log_softmax.default: (16.0 / 256.0, 127)}
LOG_SOFTMAX = {aten.log_softmax.int, aten._log_softmax.default}
# w8a16's int16 outputs of sigmoid, tanh and softmax: Q0.15 (CMSIS-NN's and TFLite's 16x8 LOGISTIC, TANH, SOFTMAX)
FIXED_OUTPUT_S16 = (2.0 ** -15, 0)
# normalisation, reductions and int8 activations: elementwise functions that run as 256-entry
# tables at int8 and layer norm (mcu_layer_norm_s8), each with output parameters of its own; arithmetic
# with a Python scalar (a table too)
TABLE_OWN_OUTPUT = {aten.gelu.default, aten.silu.default, aten.silu_.default, aten.hardsigmoid.default,
                    aten.leaky_relu.default, aten.elu.default, aten.softplus.default, aten.exp.default,
                    aten.log.default, aten.sqrt.default, aten.rsqrt.default, aten.abs.default, aten.neg.default,
                    aten.reciprocal.default, aten.erf.default, aten.pow.Tensor_Scalar, aten.log_sigmoid.default,
                    aten.mish.default,
                    aten.layer_norm.default, aten.rms_norm.default, aten.prelu.default}
MATMUL = {aten.matmul.default, aten.bmm.default}  # of two activations (int8 mcu_bmm_s8)
REDUCE_OWN_OUTPUT = {aten.sum.dim_IntList, aten.amax.default, aten.amin.default}
# int8 islands made integer: maximum, minimum and division of two tensors
EXTREMES = {aten.maximum.default, aten.minimum.default, aten.div.Tensor}
SCALAR_ARITH = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.add.Scalar,
                aten.sub.Scalar, aten.mul.Scalar, aten.div.Scalar, aten.rsub.Scalar}


# Elementwise functions with a 16x8 table (mcu_lut_s16); layer norm and PReLU per channel have none.
W8A16_TABLES = {aten.gelu.default, aten.silu.default, aten.silu_.default, aten.hardsigmoid.default,
                aten.leaky_relu.default, aten.elu.default, aten.softplus.default, aten.exp.default, aten.log.default,
                aten.sqrt.default, aten.rsqrt.default, aten.abs.default, aten.neg.default, aten.reciprocal.default,
                aten.erf.default, aten.pow.Tensor_Scalar, aten.log_sigmoid.default, aten.mish.default,
                aten.hardswish.default, aten.hardswish_.default}
_TENSOR_PAIRS = {aten.add.Tensor, aten.add_.Tensor, aten.mul.Tensor, aten.mul_.Tensor, aten.sub.Tensor,
                 aten.sub_.Tensor, aten.maximum.default, aten.minimum.default, aten.div.Tensor}


SELECT = {aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar}
COMPARISONS = {getattr(aten, f"{cmp}").Tensor for cmp in ("eq", "ne", "lt", "le", "gt", "ge")} | \
    {getattr(aten, f"{cmp}").Scalar for cmp in ("eq", "ne", "lt", "le", "gt", "ge")}


# The ops w8a16 quantizes: the families with 16x8 kernels, the batch norms folded into them, their fused
# activations and the views that only rename bytes. Any other op refuses the mode by name before quantizing.
W8A16_OPS = {*CONV_LINEAR, *BATCH_NORM, *ACTIVATIONS,
             # transposed convolutions (mcu_conv_transpose2d_s16) and quotients of two tensors (mcu_div_s16): ours
             *CONV_TRANSPOSE, aten.div.Tensor, aten.mean.dim,
             # adaptive average pooling: to 1x1 a mean (mcu_mean_s16), to other sizes an average pool or
             # mcu_adaptive_avg_pool_s16 (ours, the int8 kernel's windows) on the input's scale
             aten.adaptive_avg_pool2d.default, aten.adaptive_avg_pool1d.default,
             aten.add.Tensor, aten.add_.Tensor, aten.pad.default,
             # sums (mcu_mean_s16 without the count), amax and amin (mcu_amax_s16, mcu_amin_s16) over dims
             *REDUCE_OWN_OUTPUT, aten.constant_pad_nd.default,
             aten.max_pool2d.default, aten.avg_pool2d.default, aten.select.int, aten.slice.Tensor,
             aten.flatten.using_ints, aten.view.default,
             aten.reshape.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default, aten.dropout.default,
             aten.contiguous.default, aten.clone.default,
             # an nn.LSTM layer kept whole (mcu_lstm_s16, CMSIS-NN's arm_lstm_unidirectional_s16), an nn.GRU layer
             # (mcu_gru_s16, on the LSTM's conventions), each from the zero state or a given one, an nn.GRUCell
             # step, and the permutes of a time-first one (a reverse direction's flips and joins are moves)
             OPS["lstm"], OPS["gru"], GRU_FROM, GRU_CELL, LSTM_FROM, aten.permute.default,
             # an nn.LSTM's final cell state c_n read by the model (mcu_lstm_final_cell_s16)
             FINAL_CELL,
             # products of two activations (mcu_bmm_s16, CMSIS-NN's arm_batch_matmul_s16), layer and RMS norm
             # (mcu_layer_norm_s16) and log-softmax (mcu_log_softmax_s16)
             *MATMUL, aten.layer_norm.default, aten.rms_norm.default, *LOG_SOFTMAX,
             # a constant attention mask before a softmax (mcu_softmax_masked_s16; the form masked_scores checks)
             aten.masked_fill.Scalar,
             # table activations and products (mcu_activation_s16, mcu_softmax_s16, mcu_mul_s16)
             aten.sigmoid.default, aten.tanh.default, *SOFTMAX, aten.mul.Tensor, aten.mul_.Tensor,
             aten.sub.Tensor, aten.sub_.Tensor,
             # every other elementwise function, and arithmetic with a number, as a 513-entry table (mcu_lut_s16)
             *W8A16_TABLES, *SCALAR_ARITH, aten.maximum.default, aten.minimum.default,
             # moves of int16 elements (mcu_concat, mcu_permute, mcu_remap, index_select, gather)
             aten.cat.default, *STACK, aten.transpose.int, aten.t.default, aten.unflatten.int,
             # and bilinear resampling (mcu_resize_bilinear_s16, the int8 kernel's tables)
             *MOVES,
             # argmax, left float by the quantizer and run on the int16 codes (mcu_argmax_s16)
             aten.argmax.default,
             # a select between tensors (mcu_where moving int16 codes, its branches on the output's parameters) on
             # a comparison, which reads the dequantized values (mcu_compare, as at int8)
             *SELECT, *COMPARISONS}
# (ops with no arithmetic of their own: the capture's bookkeeping)
_W8A16_NEUTRAL = {"getitem", "_assert_tensor_metadata", "_assert_scalar", "sym_size"}


def masked_scores(node: Node) -> bool:
    """Whether ``node`` is ``masked_fill(scores, hidden, -inf)`` with a constant mask read by one softmax over the
    last axis, the form mcu/quantize/attention.py gives a constant attention mask: the pair is one masked
    softmax (mcu_softmax_masked_s8, mcu_softmax_masked_s16)."""
    users = list(node.users)
    if node.target is not aten.masked_fill.Scalar or len(node.args) != 3 or len(users) != 1 or \
            users[0].target not in SOFTMAX or node.args[2] != float("-inf") or \
            not isinstance(node.args[1], Node) or node.args[1].op != "get_attr" or not _is_float_tensor(node.args[0]):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and int(users[0].args[1]) % val.dim() == val.dim() - 1


def _w8a16_form(node: Node) -> bool:
    """Whether an op of W8A16_OPS has the form its 16x8 kernel takes: an add, a difference, a
    product or a quotient of two tensors of one shape, or any of them of a tensor and a number (a table); a
    constant attention mask before a softmax. (Also zeros: the zero biases of a recurrent layer without biases, a
    constant of the layer, and a recurrent cell's zero first state, a constant of the loop.)"""
    if node.target is aten.zeros.default:
        return bool(node.users)
    if node.target is aten.masked_fill.Scalar:
        return masked_scores(node)
    if node.target is aten.max_pool2d.default:  # (kernel, stride, padding, dilation, ceil_mode)
        dilation = node.args[4] if len(node.args) > 4 else 1
        return all(d == 1 for d in (dilation if isinstance(dilation, (list, tuple)) else [dilation]))
    if node.target is aten.avg_pool2d.default:  # (kernel, stride, padding, ceil_mode, count_include_pad, divisor)
        padding = node.args[3] if len(node.args) > 3 else 0
        padded = any(p != 0 for p in (padding if isinstance(padding, (list, tuple)) else [padding]))
        counts_pad = bool(node.args[5]) if len(node.args) > 5 else True
        return not (padded and counts_pad) and (len(node.args) <= 6 or node.args[6] is None)
    if node.target in SCALAR_ARITH | _TENSOR_PAIRS:
        a, b = node.args[0], node.args[1]
        numbers = [isinstance(t, (int, float)) and not isinstance(t, bool) for t in (a, b)]
        if numbers.count(True) == 1:  # a tensor and a number: a table, on the tensor's shape
            t = b if numbers[0] else a
            return _is_float_tensor(t) and getattr(t.meta.get("val"), "shape", None) == \
                getattr(node.meta.get("val"), "shape", None)
        if node.target not in _TENSOR_PAIRS:
            return False
        shapes = [getattr(t.meta.get("val"), "shape", None) if isinstance(t, Node) else None for t in (a, b)]
        return _is_float_tensor(a) and _is_float_tensor(b) and shapes[0] == shapes[1] and \
            shapes[0] == getattr(node.meta.get("val"), "shape", None)
    return True


def unsupported_w8a16(model: GraphModule) -> list[tuple[str, Node]]:
    """The names of the ops of a captured graph that w8a16 has no 16x8 kernel for, each once, with the first
    node of each (whose source line the refusal names)."""
    names: list[tuple[str, Node]] = []
    for node in model.graph.nodes:
        if node.op != "call_function" or ((node.target in W8A16_OPS or node.target is aten.zeros.default)
                                          and _w8a16_form(node)):
            continue
        name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
        if node.target in SCALAR_ARITH | _TENSOR_PAIRS:
            name += " (broadcasting)"
        elif node.target is aten.div.Tensor_mode:
            name += " (with a rounding mode)"
        elif node.target is aten.max_pool2d.default:
            name += " (dilated)"
        elif node.target is aten.avg_pool2d.default:
            name += " (counting the padding, or with a divisor)"
        if name not in _W8A16_NEUTRAL and name not in (n for n, _ in names):
            names.append((name, node))
    return names


def _recurrent_ops() -> set:
    return set(OPS.values())


def _act_spec(qat: bool, bits: int = 8) -> QuantizationSpec:
    """int8 asymmetric per tensor; at 16 bits (w8a16) int16 symmetric per tensor with zero point 0, as
    CMSIS-NN's and TFLite Micro's 16x8 kernels take them."""
    if bits == 16:
        lo, hi, scheme = -32768, 32767, torch.per_tensor_symmetric
        obs16 = (FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=lo, quant_max=hi,
                                        dtype=torch.int16, qscheme=scheme)
                 if qat else MinMaxObserver.with_args(eps=2**-20, dtype=torch.int16, qscheme=scheme, quant_min=lo,
                                                      quant_max=hi))
        return QuantizationSpec(dtype=torch.int16, quant_min=lo, quant_max=hi, qscheme=scheme,
                                observer_or_fake_quant_ctr=obs16)
    obs = (FakeQuantize.with_args(observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127,
                                  dtype=torch.int8, qscheme=torch.per_tensor_affine)
           if qat else MinMaxObserver.with_args(eps=2**-12))
    return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                            observer_or_fake_quant_ctr=obs)


def _weight_spec(qat: bool, ch_axis: int = 0, bits: int = 8) -> QuantizationSpec:
    """Symmetric per channel on [-(2^(bits-1) - 1), 2^(bits-1) - 1]: [-127, 127], or [-7, 7] at 4 bits (the
    codes stay int8 in the graph; the lowering packs 4-bit ones two a byte)."""
    top = (1 << (bits - 1)) - 1
    obs = (FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver, quant_min=-top, quant_max=top,
                                  dtype=torch.int8, qscheme=torch.per_channel_symmetric, ch_axis=ch_axis)
           if qat else PerChannelMinMaxObserver.with_args(eps=2**-12, ch_axis=ch_axis, quant_min=-top,
                                                          quant_max=top))
    return QuantizationSpec(dtype=torch.int8, quant_min=-top, quant_max=top, qscheme=torch.per_channel_symmetric,
                            ch_axis=ch_axis, observer_or_fake_quant_ctr=obs)


def _single_user(node: Node) -> Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _fixed_spec(scale: float, zero_point: int, bits: int = 8) -> FixedQParamsQuantizationSpec:
    if bits == 16:
        return FixedQParamsQuantizationSpec(dtype=torch.int16, scale=scale, zero_point=zero_point, quant_min=-32768,
                                            quant_max=32767, qscheme=torch.per_tensor_symmetric)
    return FixedQParamsQuantizationSpec(dtype=torch.int8, scale=scale, zero_point=zero_point, quant_min=-128,
                                        quant_max=127, qscheme=torch.per_tensor_affine)


def _operand_spec(operand: Node, act: QuantizationSpec) -> object:
    """An operand's spec in a product, a sum or a linear layer: a sigmoid's or tanh's fixed output parameters
    as they are (a gate times a state, or a recurrent product of a tanh state, reads the table's codes, where
    an observer of its own would add a requantize that only loses precision), else ``act``."""
    ann = operand.meta.get("quantization_annotation")
    out = getattr(ann, "output_qspec", None)
    return out if isinstance(out, FixedQParamsQuantizationSpec) else act


def _annotated(node: Node) -> bool:
    ann = node.meta.get("quantization_annotation")
    return ann is not None and ann._annotated


def _mark(node: Node, inputs: dict[Node, object] | None = None, output: object | None = None) -> None:
    node.meta["quantization_annotation"] = QuantizationAnnotation(
        input_qspec_map=dict(inputs or {}), output_qspec=output, _annotated=True)


def _reader_spec(operand: Node, act: QuantizationSpec) -> object:
    """An operand produced with fixed parameters (softmax's attention weights, 1/256) is read on them: an
    input observer of its own would add a requantization and its rounding between the two."""
    ann = operand.meta.get("quantization_annotation")
    if ann is not None and isinstance(ann.output_qspec, FixedQParamsQuantizationSpec):
        return SharedQuantizationSpec(operand)
    return act


def _is_float_tensor(node: object) -> bool:
    if not isinstance(node, Node):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


class MCUQuantizer(Quantizer):
    """Annotates for int8 inference with CMSIS-NN arithmetic; ``qat=True`` uses fake-quantize modules."""

    def __init__(self, qat: bool = False, custom_ops: tuple = (), weight_bits: int = 8, act_bits: int = 8) -> None:
        super().__init__()
        self.qat = qat
        # 16: int16 activations (w8a16); only the op families of W8A16_OPS are annotated
        self.act_bits = act_bits
        # 4: convolution and linear weights (not transposed convolutions') on 4 bits (w4a8)
        self.weight_bits = weight_bits
        # Registered custom ops (mcu/capture/custom_ops.py), by their torch name: an op with an int8 kernel is
        # quantized as its registration says; one without stays fp32 (left unannotated).
        self.custom = {c.name: c for c in custom_ops}

    def annotate(self, model: GraphModule) -> GraphModule:
        act, weight = _act_spec(self.qat, self.act_bits), _weight_spec(self.qat, bits=self.weight_bits)
        weight_transposed = _weight_spec(self.qat, ch_axis=1)
        handlers: list[tuple[set, Callable[[Node], None]]] = [
            (CONV_LINEAR, lambda n: self._conv_linear(n, act, weight)),
            (BINARY, lambda n: self._binary(n, act)),
            (OWN_OUTPUT, lambda n: self._own_output(n, act)),
            (SOFTMAX, lambda n: self._softmax(n, act)),
            (SHARED | ACTIVATIONS | MOVES, lambda n: self._shared(n, act)),
            ({aten.cat.default} | STACK, lambda n: self._cat(n, act)),
            # table lookups and int8 layer norm
            (TABLE_OWN_OUTPUT | REDUCE_OWN_OUTPUT, lambda n: self._own_output(n, act)),
            # int8 islands made integer: TFLite MAXIMUM/MINIMUM
            (EXTREMES, lambda n: self._extremes(n, act)),
            ({aten.clamp.Tensor}, lambda n: self._clamp_tensor(n, act)),
            (SELECT, lambda n: self._where(n, act)),
            ({aten._to_copy.default, aten.to.dtype}, lambda n: self._mask_to_float(n, act)),
            (SCALAR_ARITH, lambda n: self._scalar_arith(n, act)),
            (MATMUL, lambda n: self._matmul(n, act)),
            (CONV_TRANSPOSE, lambda n: self._conv_linear(n, act, weight_transposed)),
            # integer recurrent layers: int8 input and hidden states (the output); the weights stay
            # float here and are quantized per gate row by their lowering (mcu/passes/quantized/recurrent.py)
            (_recurrent_ops(), lambda n: self._own_output(n, act)),
            ({GRU_CELL, GRU_FROM}, lambda n: self._gru_state(n, act)),
            ({LSTM_FROM}, lambda n: self._lstm_state(n, act)),
            ({FINAL_CELL}, lambda n: self._final_cell(n, act)),
        ]
        if self.act_bits == 16:
            handlers = [(targets & W8A16_OPS, handle) for targets, handle in handlers]
        # attention masks computed from the inputs: from the fill of minus infinity to the softmax, fp32
        for node in runtime_mask_islands(model):
            _mark(node)
        for node in model.graph.nodes:
            if node.op != "call_function" or _annotated(node):
                continue
            if self.act_bits == 16 and node.target not in W8A16_OPS:
                continue  # refused before quantizing (unsupported_w8a16)
            if node.target in LOG_SOFTMAX and self.act_bits == 16:
                self._own_output(node, act)  # (mcu_log_softmax_s16 takes any output scale: a calibrated one)
                continue
            if node.target in FIXED_OUTPUT:
                scale, zp = FIXED_OUTPUT_S16 if self.act_bits == 16 else FIXED_OUTPUT[node.target]
                self._fixed(node, act, scale, zp)
                continue
            if node.target in (aten.adaptive_avg_pool2d.default, aten.adaptive_avg_pool1d.default) \
                    and not _global_pool(node):
                self._shared(node, act)  # averages that share the input's quantization
                continue
            reg = self.custom.get(getattr(getattr(node.target, "_schema", None), "name", None))
            if reg is not None:
                self._custom(node, act, reg)
                continue
            for targets, handle in handlers:
                if node.target in targets:
                    handle(node)
                    break
        return model

    def validate(self, model: GraphModule) -> None:
        return None

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Attention written out op by op and splits as views, so that both quantize (before annotating)."""
        return prepare_attention(model)

    # --- patterns -----------------------------------------------------------------------------------------

    def _tail(self, node: Node, allow_bn: bool) -> list[Node]:
        """The fused chain after ``node``: optional batch norm, optional activation (single users only)."""
        chain: list[Node] = []
        cur = node
        nxt = _single_user(cur)
        if allow_bn and nxt is not None and nxt.target in BATCH_NORM:
            chain.append(nxt)
            cur = nxt
            nxt = _single_user(cur)
            if nxt is not None and nxt.target is __import__("operator").getitem:
                chain.append(nxt)
                cur = nxt
                nxt = _single_user(cur)
        if nxt is not None and nxt.target in ACTIVATIONS:
            chain.append(nxt)
        return chain

    def _finish_chain(self, chain: list[Node], head: Node, act: QuantizationSpec) -> None:
        for n in chain[:-1]:
            _mark(n)
        last = chain[-1] if chain else head
        if chain:
            _mark(last, output=act)
        else:
            head.meta["quantization_annotation"].output_qspec = act

    def _conv_linear(self, node: Node, act: QuantizationSpec, weight: QuantizationSpec) -> None:
        x, w = node.args[0], node.args[1]
        if not (_is_float_tensor(x) and isinstance(w, Node)):
            return
        _mark(node, {x: _operand_spec(x, act), w: weight})
        self._finish_chain(self._tail(node, allow_bn=True), node, act)

    def _binary(self, node: Node, act: QuantizationSpec) -> None:
        a, b = node.args[0], node.args[1]
        if not (_is_float_tensor(a) and _is_float_tensor(b)):
            self._scalar_arith(node, act)  # a scalar operand: a table lookup
            return
        _mark(node, {a: _operand_spec(a, act), b: _operand_spec(b, act)})
        self._finish_chain(self._tail(node, allow_bn=False), node, act)

    def _own_output(self, node: Node, act: QuantizationSpec) -> None:
        x = node.args[0]
        if _is_float_tensor(x):
            _mark(node, {x: act}, act)

    def _gru_state(self, node: Node, act: QuantizationSpec) -> None:
        """A GRU cell's step, or a GRU layer from an initial state (w8a16): the input with its own parameters,
        the state read on the output's (the kernel reads the previous state at the hidden state's scale);
        chained steps then share one observer, the zero first state included."""
        x, h = node.args[0], node.args[1]
        if _is_float_tensor(x) and _is_float_tensor(h):
            _mark(node, {x: act, h: act}, SharedQuantizationSpec((h, node)))

    def _lstm_state(self, node: Node, act: QuantizationSpec) -> None:
        """An LSTM layer from (h0, c0) (w8a16): the input with its own parameters, h0 read on the output's (as a
        GRU's state), c0 on the cell's fixed power-of-two scale 2^-state_shift (mcu_lstm_s16's cell)."""
        x, h, c, shift = node.args[0], node.args[1], node.args[2], node.args[7]
        if _is_float_tensor(x) and _is_float_tensor(h) and _is_float_tensor(c) and isinstance(shift, int):
            _mark(node, {x: act, h: act, c: _fixed_spec(2.0 ** -shift, 0, 16)}, SharedQuantizationSpec((h, node)))

    def _final_cell(self, node: Node, act: QuantizationSpec) -> None:
        """An LSTM layer's final cell c_n: the layer's input, its hidden states ``y`` and h0 read on the layer's
        output parameters, c0 and the cell itself on the fixed int16 2^-state_shift (mcu_lstm_final_cell_s16; at
        int8 mcu_lstm_final_cell_s8, whose cell is int16 too). At int8 from the zero state only (an int8 layer from
        a given state runs in fp32, and the frontend refuses its cell by name)."""
        x, y, shift = node.args[0], node.args[5], node.args[6]
        h, c = (node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in ((7, "h0"), (8, "c0")))
        if not (_is_float_tensor(x) and _is_float_tensor(y) and isinstance(shift, int)) or \
                (self.act_bits != 16 and (isinstance(h, Node) or isinstance(c, Node))):
            return
        cell = _fixed_spec(2.0 ** -shift, 0, 16)
        specs = {x: act, y: SharedQuantizationSpec(y)}
        if _is_float_tensor(h) and _is_float_tensor(c):
            specs.update({h: SharedQuantizationSpec(y), c: cell})
        _mark(node, specs, cell)

    def _matmul(self, node: Node, act: QuantizationSpec) -> None:
        """A product of two activations; a parameter operand is left to the linear layers."""
        a, b = node.args[0], node.args[1]
        if _is_float_tensor(a) and _is_float_tensor(b) and a.op != "get_attr" and b.op != "get_attr":
            _mark(node, {a: _reader_spec(a, act), b: _reader_spec(b, act)}, act)

    def _extremes(self, node: Node, act: QuantizationSpec) -> None:
        """maximum/minimum of two tensors: each operand and the output with parameters of their own
        (mcu_maximum_s8 rescales like the int8 add); a float constant operand is quantized by the lowering."""
        tensors = [a for a in node.args[:2] if _is_float_tensor(a)]
        if len(tensors) < 2:
            self._scalar_arith(node, act)  # x / s with a Python number: a table lookup
        elif node.kwargs.get("rounding_mode") is None:
            _mark(node, {t: act for t in tensors}, act)

    def _clamp_tensor(self, node: Node, act: QuantizationSpec) -> None:
        """clamp with tensor bounds: the lowering's maximum and minimum, int8 with the value between
        them on the output's grid (mcu.passes.quantized.elementwise.quantize_between_bounds)."""
        bounds = [node.args[i] if len(node.args) > i else node.kwargs.get(k) for i, k in ((1, "min"), (2, "max"))]
        tensors = [t for t in [node.args[0], *bounds] if _is_float_tensor(t)]
        if _is_float_tensor(node.args[0]) and all(b is None or _is_float_tensor(b) for b in bounds):
            _mark(node, {t: act for t in dict.fromkeys(tensors)}, act)

    def _where(self, node: Node, act: QuantizationSpec) -> None:
        """where(mask, a, b) (TFLite SELECT_V2): the branches and the output share one quantization,
        so the int8 select moves codes; the mask stays bytes."""
        branches = [t for t in node.args[1:3] if _is_float_tensor(t)]
        if not _is_float_tensor(node):
            return
        if not branches:
            _mark(node, {}, act)
            return
        first = branches[0]
        _mark(node, {first: act, **{t: SharedQuantizationSpec((first, node)) for t in branches[1:]}},
              SharedQuantizationSpec((first, node)))

    def _mask_to_float(self, node: Node, act: QuantizationSpec) -> None:
        """mask.float(): a where of 1.0 and 0.0 with an output of its own."""
        src = node.args[0]
        val = src.meta.get("val") if isinstance(src, Node) else None
        if isinstance(val, torch.Tensor) and val.dtype == torch.bool and _is_float_tensor(node):
            _mark(node, {}, act)

    def _scalar_arith(self, node: Node, act: QuantizationSpec) -> None:
        """x op s with a Python number s: quantized in and out, it becomes a table lookup."""
        tensors = [a for a in node.args[:2] if isinstance(a, Node)]
        if len(tensors) == 1 and _is_float_tensor(tensors[0]) and \
                all(isinstance(a, (int, float)) for a in node.args[:2] if not isinstance(a, Node)):
            _mark(node, {tensors[0]: act}, act)

    def _custom(self, node: Node, act: QuantizationSpec, reg: object) -> None:
        if reg.int8 is None:  # type: ignore[attr-defined]
            return  # fp32 island: convert_pt2e puts dequantize before it and quantize after
        tensors = [a for a in node.args if _is_float_tensor(a)]
        if not tensors:
            return
        mode = reg.int8_output  # type: ignore[attr-defined]
        out: object = act
        if mode[0] == "fixed":
            out = _fixed_spec(float(mode[1]), int(mode[2]))
        elif mode[0] == "input":
            out = SharedQuantizationSpec((tensors[0], node))
        _mark(node, {t: act for t in tensors}, out)

    def _softmax(self, node: Node, act: QuantizationSpec) -> None:
        """Softmax's fixed output parameters. After ``masked_fill(x, hidden, -inf)`` with a constant mask
        (attention's, mcu/quantize/attention.py) the pair is one softmax that skips the hidden positions: the
        fill's input is read on its producer's parameters and nothing observes the infinite values between."""
        x = node.args[0]
        if isinstance(x, Node) and x.target is aten.masked_fill.Scalar and len(x.users) == 1 and \
                isinstance(x.args[1], Node) and x.args[1].op == "get_attr" and x.args[2] == float("-inf") and \
                _is_float_tensor(x.args[0]):
            _mark(x)
            _mark(node, {}, _fixed_spec(*(FIXED_OUTPUT_S16 if self.act_bits == 16 else (1.0 / 256.0, -128)),
                                        self.act_bits))
            return
        self._fixed(node, act, *(FIXED_OUTPUT_S16 if self.act_bits == 16 else (1.0 / 256.0, -128)))

    def _fixed(self, node: Node, act: QuantizationSpec, scale: float, zero_point: int) -> None:
        x = node.args[0]
        if _is_float_tensor(x):
            _mark(node, {x: act}, _fixed_spec(scale, zero_point, self.act_bits))

    def _shared(self, node: Node, act: QuantizationSpec) -> None:
        x = node.args[0]
        if _is_float_tensor(x):
            _mark(node, {x: act}, SharedQuantizationSpec((x, node)))

    def _cat(self, node: Node, act: QuantizationSpec) -> None:
        inputs = [t for t in node.args[0] if isinstance(t, Node)]
        if not inputs or not all(_is_float_tensor(t) for t in inputs):
            return
        first = inputs[0]
        spec_map: dict[Node, object] = {first: act}
        for t in inputs[1:]:
            spec_map[t] = SharedQuantizationSpec((first, node))
        _mark(node, spec_map, SharedQuantizationSpec((first, node)))
