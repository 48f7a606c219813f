"""``mcu eval``: what accuracy int8 costs, on the user's own evaluation set.

A model file may name ``eval_data``: a list of ``(inputs, label)`` pairs, or a function returning an
iterable of them (``inputs`` a tensor or a tuple of tensors shaped like ``example_inputs``), and
optionally ``eval_metric``: a function ``(output, label) -> float`` scoring one sample (its
``__name__`` names it in the report), or ``"top1"`` / ``"top5"``. Default: top-1 accuracy of the first
output.

Three figures come out: eager PyTorch (fp32) on every sample, the compiled program through the
Python integer reference on every sample (for int8 models; the host build of the generated C
otherwise), and the firmware on the board's simulator for an evenly spaced sample of N: one firmware
run with the N images as its bundled vectors, whose outputs must equal the reference bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from mcu.commands.common import bias_correction, mixed_options, print_json, weight_rounding
from mcu.errors import McuError
from mcu.capture.evalset import Metric, eval_set
from mcu.capture.loader import ModelSpec, flatten_outputs, load_model_file
from mcu.progress import quiet_torch, stage
from mcu.quantize import modes

@dataclass
class EvalReport:
    metric: str
    samples: int
    fp32: float
    compiled: float  # int8: the Python integer reference; fp32 model: the host build
    compiled_by: str
    agreement: float  # share of samples whose top-1 prediction equals fp32's
    device_samples: int
    device: float
    device_equals_reference: int  # sampled images whose device outputs equal the reference's exactly
    device_predictions: list[int]
    reference_predictions: list[int]
    quantize: str = ""  # the mode the model compiled at
    flash_bytes: int = 0  # the sampled firmware's, test vectors included
    model_flash_bytes: int = 0  # its weights, model code, kernels and runtime: what a product's firmware adds
    weights_flash_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sample_indices(total: int, n: int) -> list[int]:
    """``n`` evenly spaced indices out of ``total`` (all when n >= total)."""
    if n >= total:
        return list(range(total))
    return sorted({int(i) for i in np.linspace(0, total - 1, n)})


def _score(metric: Metric, outputs: Sequence[torch.Tensor], labels: Sequence[Any]) -> float:
    return float(np.mean([metric(o, label) for o, label in zip(outputs, labels)]))


def _top1(output: torch.Tensor) -> int:
    return int(torch.argmax(output.reshape(-1)))


def evaluate(spec: ModelSpec, board: str, quantize: str, samples: int = 50, timeout_s: float = 600.0,
             compile_fn: Callable[..., Any] | None = None) -> EvalReport:
    """Compile ``spec`` with the sampled images as its bundled vectors and measure the three figures.

    ``compile_fn(spec, board, quantize)`` compiles (default :func:`mcu.api.compile_spec`)."""
    # lazy: keeps jinja2 out of this module's import
    from mcu.api import compile_spec

    data = eval_set(spec)
    if samples < 1:
        raise McuError("--samples must be at least 1")
    picked = sample_indices(len(data.inputs), samples)
    # The sampled images become the firmware's bundled vectors: one firmware run checks them all.
    sampled_spec = dataclasses.replace(spec, test_inputs=[data.inputs[i] for i in picked])
    cm = (compile_fn or compile_spec)(sampled_spec, board, quantize)

    float_model = spec.extras.get("float_model")  # after quantization-aware training: the model before it
    with stage("evaluate"):
        with torch.no_grad():
            fp32 = [_float_output(float_model, x, cm) for x in data.inputs]
        if cm.reference_is_exact:
            compiled_by = "Python integer reference"
            compiled = [torch.from_numpy(cm.decode_outputs(cm.reference_raw(*x))[0]) for x in data.inputs]
        else:
            compiled_by = "host build" if modes.is_float(cm.quantize) else "host build (mixed graph)"
            compiled = [cm.run(*x)[0] for x in data.inputs]
    fw = cm.build()
    sim = cm.simulate(timeout_s=timeout_s)
    device = [torch.from_numpy(np.ascontiguousarray(row[0])) for row in sim.outputs]
    ref_sampled = [compiled[i] for i in picked]
    equal = sum(bool(torch.equal(d.reshape(-1), r.reshape(-1).to(d.dtype))) for d, r in zip(device, ref_sampled))
    return EvalReport(
        metric=data.metric_name, samples=len(data.inputs),
        fp32=_score(data.metric, fp32, data.labels),
        compiled=_score(data.metric, compiled, data.labels), compiled_by=compiled_by,
        agreement=float(np.mean([_top1(a) == _top1(b) for a, b in zip(fp32, compiled)])),
        device_samples=len(picked),
        device=_score(data.metric, device, [data.labels[i] for i in picked]),
        device_equals_reference=equal,
        device_predictions=[_top1(d) for d in device],
        reference_predictions=[_top1(r) for r in ref_sampled],
        quantize=cm.quantize, flash_bytes=fw.flash_bytes,
        model_flash_bytes=_model_flash(fw.sizes) if fw.sizes is not None else fw.flash_bytes,
        weights_flash_bytes=fw.sizes.flash["weights"] if fw.sizes is not None else 0,
    )


def _float_output(float_model: Any, x: tuple[torch.Tensor, ...], cm: Any) -> torch.Tensor:
    if float_model is None:
        return cm.eager(*x)[0].detach().float()
    return flatten_outputs(float_model(*x), cm.spec.name)[0][1].detach().float()


def _model_flash(sizes: Any) -> int:
    return sum(sizes.flash[category] for category in ("runtime", "kernels", "model code", "weights"))


def cmd_eval(args: argparse.Namespace) -> int:
    # lazy: keeps jinja2 out of this module's import
    from mcu.api import backend_options, compile_spec

    board = args.board or "mps2-an505"
    with quiet_torch(verbose=args.verbose):
        with stage("load"):
            spec = load_model_file(args.model)

        def compile_quietly(s: Any, b: str, q: str) -> Any:
            return compile_spec(s, b, q, backend_options(packed_weights=False if args.compact_weights else None),
                                weight_palette=getattr(args, "weight_palette", None), mixed=mixed_options(args),
                                bias_correction=bias_correction(args), weight_rounding=weight_rounding(args))

        if args.qat:
            # lazy: keeps torchao out of this module's import
            from mcu.quantize.qat import with_qat

            spec = with_qat(spec, args.quantize)

        report = evaluate(spec, board, args.quantize, samples=args.samples, timeout_s=args.timeout,
                          compile_fn=compile_quietly)
    matches = report.device_equals_reference == report.device_samples
    if args.json:
        print_json({"model": spec.name, "board": board, **report.as_dict(), "passed": matches})
    else:
        kind = ("fp32" if modes.is_float(report.quantize) else report.quantize) + (" (QAT)" if args.qat else "")
        if getattr(args, "weight_palette", None) is not None:
            kind += f" LUT{args.weight_palette}"  # (fits the table's first column)
        rows = [("fp32, eager PyTorch", report.fp32, report.samples, ""),
                (f"{kind}, {report.compiled_by}", report.compiled, report.samples,
                 f"top-1 agrees with fp32 on {100 * report.agreement:.1f} %"),
                (f"{kind}, {board} simulated", report.device, report.device_samples,
                 f"outputs equal the reference on {report.device_equals_reference}/{report.device_samples}")]
        print(f"{spec.name}: eval_data, metric {report.metric}")
        print(f"{'':<36}{report.metric:>8} {'samples':>8}")
        for name, value, n, note in rows:
            print(f"{name:<36}{100 * value:>6.1f} % {n:>8}   {note}".rstrip())
        print(f"flash: {report.model_flash_bytes} B for the model ({report.weights_flash_bytes} B of weights, and "
              f"code, kernels, runtime); "
              f"{report.flash_bytes} B with the harness and its {report.device_samples} vectors")
    return 0 if matches else 1
