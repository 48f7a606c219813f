"""Stage 2 (int8): torchao's pt2e flow with :class:`MCUQuantizer`.

``export -> fold batch norm into linear layers -> prepare_pt2e -> calibrate ->
[GPTQ weight rounding (mcu/quantize/gptq.py)] -> [correct biases (mcu/quantize/bias_correction.py)] ->
convert_pt2e``; the result is a module whose graph holds
quantize/dequantize nodes around float ops, which ``torch.export`` captures
again for the rest of the pipeline. QAT uses ``prepare_qat_pt2e`` with the
same quantizer (see :func:`prepare_qat`).
"""

from __future__ import annotations

import math
import warnings
from typing import Iterable

import torch
from torch.fx import GraphModule, Node

from mcu.errors import McuError
from mcu.quantize.attention import FILLS, MASK_PATH, prepare_attention
from mcu.quantize.bias_correction import correct_biases
from mcu.quantize.broadcast import expand_broadcasts, split_clamp_tensor, split_prelu
from mcu.quantize.gptq import round_weights
from mcu.quantize.headroom import PeakTracker
from mcu.quantize.weight_scales import search_scales
from mcu.quantize.cells import decompose_cells, share_step_ranges
from mcu.capture.export import capture_error
from mcu.capture.sourceinfo import op_source, user_source_line
from mcu.capture.recurrent import rewrite_for_int8

aten = torch.ops.aten


def _pt2e():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # lazy: keeps torchao out of this module's import
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e
    return prepare_pt2e, prepare_qat_pt2e, convert_pt2e


def is_prequantized(model: torch.nn.Module) -> bool:
    """A module already converted by pt2e (for example after QAT) carries quantize nodes."""
    graph = getattr(model, "graph", None)
    return graph is not None and any("quantize_per_tensor" in str(getattr(n, "target", "")) for n in graph.nodes)


def _get_attr(gm: GraphModule, node: object) -> torch.Tensor | None:
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    obj: object = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    return obj if isinstance(obj, torch.Tensor) else None


def fold_linear_batch_norm(gm: GraphModule) -> GraphModule:
    """Fold eval batch norm that follows a linear layer into its weight and bias.

    prepare_pt2e folds convolution + batch norm itself; linear + batch norm
    (BatchNorm1d after Linear) would otherwise be quantized as two steps.
    """
    counter = 0
    for bn in list(gm.graph.nodes):
        if bn.op != "call_function" or bn.target is not aten.batch_norm.default:
            continue
        lin = bn.args[0]
        if not isinstance(lin, Node) or lin.target is not aten.linear.default or len(lin.users) != 1:
            continue
        if bn.args[5]:  # training-mode batch norm has no fixed statistics
            continue
        w = _get_attr(gm, lin.args[1])
        b = _get_attr(gm, lin.args[2]) if len(lin.args) > 2 else None
        gamma, beta, mean, var = (_get_attr(gm, a) for a in bn.args[1:5])
        if w is None or mean is None or var is None:
            continue
        eps = float(bn.args[7])
        scale = (gamma if gamma is not None else torch.ones_like(mean)) / torch.sqrt(var + eps)
        shift = (beta if beta is not None else torch.zeros_like(mean)) - mean * scale
        new_w = (w * scale[:, None]).detach()
        new_b = ((b if b is not None else torch.zeros_like(mean)) * scale + shift).detach()
        counter += 1
        wname, bname = f"_mcu_folded_weight_{counter}", f"_mcu_folded_bias_{counter}"
        gm.register_buffer(wname, new_w)
        gm.register_buffer(bname, new_b)
        with gm.graph.inserting_before(lin):
            wn = gm.graph.get_attr(wname)
            bn_node = gm.graph.get_attr(bname)
        lin.args = (lin.args[0], wn, bn_node)
        bn.replace_all_uses_with(lin)
        gm.graph.erase_node(bn)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def export_for_quantization(model: torch.nn.Module, example_inputs: tuple, where: str = "",
                            example_line: int | None = None) -> GraphModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        # recurrent cells as their gates' ops, which the quantizer annotates (mcu/quantize/cells.py)
        try:
            exported = torch.export.export(model.eval(), example_inputs)
        except Exception as exc:
            raise capture_error(exc, model, example_inputs, where, example_line) from None
        gm = decompose_cells(exported).module(check_guards=False)
    return fold_linear_batch_norm(gm)


def quantize_static(model: torch.nn.Module, example_inputs: tuple,
                    calibration: Iterable[tuple[torch.Tensor, ...]] | None, where: str = "model",
                    custom_ops: tuple = (), example_line: int | None = None, weight_bits: int = 8,
                    act_bits: int = 8, bias_correction: bool = False,
                    weight_rounding: str = "nearest") -> GraphModule:
    """Post-training static int8 quantization; returns the converted module. ``weight_bits`` 4: the
    convolution and linear weights on [-7, 7] (w4a8); ``act_bits`` 16: int16 activations (w8a16), refused by
    name before quantizing when the model has an op without a 16x8 kernel. ``bias_correction``: each
    convolution's and linear layer's bias corrected by the mean output error of the quantized model over the
    calibration data (mcu/quantize/bias_correction.py). At 16 bits each activation range is widened to
    where its calibration samples' peaks put one new input in 1,000 past it (mcu/quantize/headroom.py). ``weight_rounding`` "gptq": the convolution, linear and
    recurrent weights rounded onto their grids with each layer's rounding error compensated over the calibration
    data (mcu/quantize/gptq.py), before the biases are corrected for what it leaves; "searched": each output
    channel's (gate row's) scale searched for the least output error (mcu/quantize/weight_scales.py), recurrent
    matrices GPTQ-rounded on it and every other weight to its nearest code; "nearest": each to its nearest code
    on the largest magnitude's grid."""
    if calibration is None:
        raise McuError(f"{where}: static int8 quantization needs calibration data",
                       hint="add `calibration = [(x1,), (x2,), ...]` (a few typical inputs) to the model file, "
                            "or use --quantize none")
    # lazy: keeps torchao out of this module's import
    from mcu.quantize.quantizer import MCUQuantizer, unsupported_w8a16

    prepare_pt2e, _, convert_pt2e = _pt2e()
    # integer recurrent layers: nn.LSTM/nn.GRU kept whole as one op per layer (mcu/capture/recurrent.py)
    calibration = list(calibration)
    model = rewrite_for_int8(model, calibration, cells=act_bits == 16)
    gm = export_for_quantization(model, example_inputs, where, example_line)
    if act_bits == 16:  # PReLU and broadcasting arithmetic on the same-shape 16x8 kernels (mcu/quantize/broadcast.py)
        split_prelu(gm)
        split_clamp_tensor(gm)
        expand_broadcasts(gm)
    # attention written out first (as the quantizer does before annotating): its products, scaling and softmax
    # each have 16x8 kernels, where the whole scaled_dot_product_attention has none
    missing = unsupported_w8a16(prepare_attention(gm)) if act_bits == 16 else []
    if missing:
        # the first op's line and module: an attention layer's ops (bmm, softmax) are not what the user wrote
        first = op_source(missing[0][1])
        at = f" (the first at {first})" if first else ""
        raise McuError(f"{where}: --quantize w8a16 has no 16x8 kernel for: {', '.join(n for n, _ in missing)}{at}",
                       hint="w8a16 runs linear layers, convolutions, grouped, depthwise and transposed ones (with "
                            "their batch norms and ReLU/clamp), adds, differences, products, quotients, maxima and "
                            "minima of tensors (broadcasting too), clamps with tensor bounds, PReLU, sigmoid, tanh, "
                            "softmax, log-softmax, elementwise functions and arithmetic with numbers (tables), max "
                            "and average pools (ceil mode too), adaptive average pools, argmax, means, sums, "
                            "maxima and minima over dims, products of two activations (attention, a constant mask "
                            "too), layer and RMS norm, LSTM (with c_n) and GRU layers, GRU cells, LSTM and RNN cells "
                            "as their gates, concatenations, moves, slices and views; "
                            "use --quantize int8 for this model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_pt2e(gm, MCUQuantizer(custom_ops=custom_ops, weight_bits=weight_bits,
                                                 act_bits=act_bits))
        # at 16 bits each sample's peaks, for the ranges' headroom (mcu/quantize/headroom.py)
        peaks = PeakTracker(prepared) if act_bits == 16 else None
        with torch.no_grad():
            for i, batch in enumerate(calibration):
                try:
                    if peaks is not None:
                        peaks.before()
                    prepared(*batch)
                    if peaks is not None:
                        peaks.after()
                except Exception as exc:
                    raise McuError(f"{where}: calibration[{i}] failed to run through the model: "
                                   f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        _check_observed_ranges(prepared, where)
        if peaks is not None:  # past what calibration saw, before the steps share ranges and weights fit them
            peaks.widen()
        share_step_ranges(prepared)  # one scale per op of a recurrent cell over its steps (mcu/quantize/cells.py)
        float_weights: dict[str, torch.Tensor] = {}
        if weight_rounding == "searched":  # the grids first: GPTQ and bias correction work on them
            for searched in search_scales(prepared, calibration, centered=bias_correction):
                float_weights.update(zip(searched.weights, searched.originals))
        rounded = []
        if weight_rounding in ("gptq", "searched"):  # on the final grids, before bias correction measures the error
            rounded = round_weights(prepared, calibration, centered=bias_correction, float_weights=float_weights,
                                    recurrent_only=weight_rounding == "searched")
        if bias_correction:  # with every observer's final parameters, before convert_pt2e freezes the weights
            correct_biases(prepared, calibration, {**float_weights, **{r.weight: r.original for r in rounded}},
                           weight_bits)
        return convert_pt2e(prepared)


def _check_observed_ranges(prepared: GraphModule, where: str) -> None:
    """Every observer saw finite values: a NaN or inf inside the model (log of 0, a division by 0) leaves no
    range to quantize with. Names the op that produced it and the user's line."""
    for node in prepared.graph.nodes:
        if node.op != "call_module":
            continue
        observer = getattr(prepared, str(node.target), None)
        lo, hi = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
        if not isinstance(lo, torch.Tensor) or not isinstance(hi, torch.Tensor) or lo.numel() == 0:
            continue
        if bool(torch.isfinite(lo).all()) and bool(torch.isfinite(hi).all()):
            continue
        source = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else node
        op = source.target.__name__ if callable(source.target) and hasattr(source.target, "__name__") \
            else str(source.target)
        if isinstance(source, Node) and _writes_infinity(source):
            # a fill the model asks for (an attention mask made by torch's layer or by hand), not an overflow
            hint = ("the model writes this infinity itself (a mask filled with -inf): int8 takes one only as an "
                    "attention mask that reaches the softmax of the scores (attn_mask=, key_padding_mask=, "
                    "scores.masked_fill(mask, -inf).softmax(-1)); elsewhere fill with a finite value, or use "
                    "--quantize none")
        else:
            hint = ("keep the model's values finite on the calibration data (e.g. clamp before log or division), "
                    "or use --quantize none")
        raise McuError(f"{where}: calibration makes {op}{user_source_line(source)} produce NaN or inf "
                       f"(observed range {lo.min().item()} .. {hi.max().item()})", hint=hint)


def _writes_infinity(node: Node) -> bool:
    """Whether ``node`` fills or selects an infinite number (masked_fill(m, -inf), where), or carries one such
    op's values on (views, sums: an additive mask): the model's own infinity, not an overflow."""
    seen, stack = {node}, [node]
    while stack:
        n = stack.pop()
        if n.target in FILLS and any(isinstance(a, float) and math.isinf(a) for a in n.args):
            return True
        if n.target not in MASK_PATH and n is not node:
            continue
        for m in n.all_input_nodes:
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return False


def prepare_qat(model: torch.nn.Module, example_inputs: tuple, weight_bits: int = 8) -> GraphModule:
    """A module with fake quantization for quantization-aware training; train it, then :func:`convert`.
    ``weight_bits`` 4: the convolution and linear weights fake-quantized on [-7, 7], as ``--quantize w4a8``
    quantizes them, so that training adapts to 4-bit weights."""
    # lazy: keeps torchao out of this module's import
    from mcu.quantize.quantizer import MCUQuantizer

    _, prepare_qat_pt2e, _ = _pt2e()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = decompose_cells(torch.export.export(model.train(), example_inputs)).module(check_guards=False)
        return prepare_qat_pt2e(gm, MCUQuantizer(qat=True, weight_bits=weight_bits))


def convert(prepared: GraphModule) -> GraphModule:
    """Finish QAT (or a manually calibrated prepare) into a quantized module."""
    _, _, convert_pt2e = _pt2e()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # lazy: keeps torchao out of this module's import; older torchao lacks it
            from torchao.quantization.pt2e import move_exported_model_to_eval

            move_exported_model_to_eval(prepared)
        except Exception:  # older torchao: already in eval form
            pass
        return convert_pt2e(prepared)


