"""tcn's w8a16 error budget: a float64 copy of its lowered graph (the int8 weight codes times their scales, the int16
activation scales, clamped) run with one source of error at a time, each layer's bias corrected again over the
calibration set for that configuration (bias correction's rule: the mean fp32 minus quantized pre-activation per
channel, layer by layer), output SQNR against fp32 on the bundled test inputs and on N fresh seeded normal inputs.

    .venv/bin/python bench/tcn_error_budget.py [--fresh 480]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["block0.conv1", "block0.conv2", "block0.skip", "block1.conv1", "block1.conv2", "block2.conv1",
          "block2.conv2", "classifier"]
TENSORS = ["input", *LAYERS[:3], "sum0", *LAYERS[3:5], "sum1", *LAYERS[5:7], "sum2", "mean", "output"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=480)
    args = parser.parse_args(argv)
    # lazy: torch and the compiler load after the arguments parse
    import numpy as np
    import torch
    import torch.nn.functional as F

    from mcu.api import lower_file
    from mcu.layouts import from_memory_order

    warnings.simplefilter("ignore")
    lowered = lower_file(ROOT / "examples" / "tcn.py", quantize="w8a16")
    model = lowered.spec.model
    modules = [m for b in model.blocks for m in (b.conv1, b.conv2, b.skip) if isinstance(m, torch.nn.Conv1d)]
    modules.append(model.classifier)
    weighted = [op for op in lowered.graph.ops if op.kind in ("conv2d", "linear")]
    weights = []
    for op, m in zip(weighted, modules):
        w = op.inputs[1]
        codes = from_memory_order(np.asarray(w.data).reshape(-1), w).astype(np.float64)
        scales = np.array(w.quant.scale).reshape(-1, *[1] * (codes.ndim - 1))
        weights.append(torch.from_numpy(codes * scales).reshape(m.weight.shape))
    scales = dict(zip(["input", *LAYERS[:7]], [lowered.graph.inputs[0].quant.scale[0]]
                      + [op.output.quant.scale[0] for op in weighted[:7]]))
    sums = [op.output.quant.scale[0] for op in lowered.graph.ops if op.kind == "add"]
    scales.update(sum0=sums[0], sum1=sums[1], sum2=sums[2], output=weighted[7].output.quant.scale[0],
                  mean=next(op.output.quant.scale[0] for op in lowered.graph.ops if op.kind == "reduce"))

    def forward(x, rounded, clamped, biases):
        """(output, each layer's pre-activation): ``rounded`` layers with int8 weights, ``clamped`` tensors on
        their int16 grids."""
        def q(v, name):
            if name not in clamped:
                return v
            return torch.clamp(torch.round(v / scales[name]), -32768, 32767) * scales[name]

        def layer(i, v, **kw):
            w = weights[i] if LAYERS[i] in rounded else modules[i].weight.double()
            y = F.conv1d(v, w, biases[i], **kw) if i < 7 else F.linear(v, w, biases[i])
            pre.append(y)
            return y

        pre: list = []
        h, i = q(x.double(), "input"), 0
        for k, block in enumerate(model.blocks):
            pad = (block.pad, 0)
            y = q(F.relu(layer(i, F.pad(h, pad), dilation=block.conv1.dilation)), LAYERS[i])
            y = q(F.relu(layer(i + 1, F.pad(y, pad), dilation=block.conv2.dilation)), LAYERS[i + 1])
            i += 2
            if k == 0:
                h, i = q(layer(i, h), LAYERS[i]), i + 1
            h = q(F.relu(y + h), f"sum{k}")
        return q(layer(7, q(h.mean(dim=2), "mean")), "output"), pre

    calibration = [c[0] for c in lowered.spec.calibration]
    with torch.no_grad():
        reference = [forward(x, (), (), [m.bias.double() for m in modules])[1] for x in calibration]

    def corrected(rounded, clamped):
        biases = [m.bias.double().clone() for m in modules]
        for i in range(len(modules)):
            got = [forward(x, rounded, clamped, biases)[1][i] for x in calibration]
            error = sum((r[i] - g).transpose(0, 1).reshape(g.shape[1], -1).sum(1) for r, g in zip(reference, got))
            biases[i] = biases[i] + error / sum(g.numel() // g.shape[1] for g in got)
        return biases

    seed = torch.Generator().manual_seed(7)
    shape = lowered.spec.test_inputs[0][0].shape
    sets = [[t[0] for t in lowered.spec.test_inputs], [torch.randn(shape, generator=seed) for _ in range(args.fresh)]]

    def sqnr(rounded, clamped) -> list[float]:
        biases = corrected(rounded, clamped)
        out = []
        for inputs in sets:
            signal = noise = 0.0
            for x in inputs:
                want = model(x).double()
                signal += float((want ** 2).sum())
                noise += float(((forward(x, rounded, clamped, biases)[0] - want) ** 2).sum())
            out.append(10 * math.log10(signal / noise) if noise else math.inf)
        return out

    rows = [("all quantized", set(LAYERS), set(TENSORS)), ("weights alone", set(LAYERS), set()),
            ("activations alone", set(), set(TENSORS))]
    rows += [(f"weights of {name} alone", {name}, set()) for name in LAYERS]
    print(f"| source | test inputs | {args.fresh} fresh inputs |\n| --- | --- | --- |")
    with torch.no_grad():
        for label, rounded, clamped in rows:
            print(f"| {label} | " + " | ".join(f"{db:.1f} dB" for db in sqnr(rounded, clamped)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
