"""Output SQNR against fp32 with and without bias correction (``--bias-correction``) and with nearest or GPTQ weight
rounding (``--weight-rounding``), per example and static mode:
the lowered graph run through the Python integer reference (the device's outputs, bit for bit) on the model
file's bundled test inputs, 10 log10(sum fp32^2 / sum (out - fp32)^2) over every output value, and the seconds
the quantization took. ``mixed`` runs at ``--budget`` dB and lists each layer's weights after the figures.

    .venv/bin/python bench/bias_correction.py fc_autoencoder,ds_cnn,tcn --modes int8,w8a16,w4a8
    .venv/bin/python bench/bias_correction.py tcn,kws_lstm --modes w8a16 --rounding nearest,gptq,searched --corrected on
    .venv/bin/python bench/bias_correction.py resnet8 --modes mixed --budget 6
    .venv/bin/python bench/bias_correction.py tcn,kws_lstm --modes w8a16 --rounding nearest,searched --corrected on --fresh 48 --fresh-scale 0.75
    .venv/bin/python bench/bias_correction.py ds_cnn --modes int8,w8a16 --corrected default --palette 3:tensor
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", help="comma-separated names under examples/")
    parser.add_argument("--modes", default="int8,w8a16,w4a8")
    parser.add_argument("--rounding", default=None,
                        help="comma-separated weight roundings: nearest, gptq, searched (default: each mode's own)")
    parser.add_argument("--corrected", default="off,on",
                        help="comma-separated bias corrections: off, on, default (the mode's own)")
    parser.add_argument("--palette", default=None, metavar="BITS[:PER]",
                        help="look-up-table weights (--weight-palette BITS, --palette-per PER: channel or tensor)")
    parser.add_argument("--fresh", type=int, default=0,
                        help="score on this many seeded normal inputs of the test inputs' shapes instead")
    parser.add_argument("--fresh-scale", type=float, default=1.0, help="those inputs' standard deviation")
    parser.add_argument("--budget", type=float, default=3.0, help="--accuracy-budget of the mixed mode")
    args = parser.parse_args(argv)

    # lazy: torch and the compiler load after the arguments parse
    import numpy as np
    import torch

    from mcu.api import lower_file
    from mcu.quantize.modes import MIXED, MixedOptions, PaletteOptions
    from mcu.capture.loader import flatten_outputs
    from mcu.reference.encoding import decode, encode
    from mcu.reference.interp import Reference

    def outputs(graph, inputs) -> list[np.ndarray]:
        flat = [encode(x.detach().numpy().astype(np.float32), t.name, t.shape, t.dim_order,
                       t.dtype if t.quant is not None else "float32",
                       t.quant.scale[0] if t.quant is not None else None, t.quant.zero_point[0] if t.quant else 0)
                for x, t in zip(inputs, graph.inputs)]
        return [decode(o, t.shape, t.dim_order, t.dtype, t.quant.scale[0] if t.quant is not None else None,
                       t.quant.zero_point[0] if t.quant is not None else 0).astype(np.float64)
                for o, t in zip(Reference(graph).run(flat), graph.outputs)]

    modes, roundings = args.modes.split(","), (args.rounding or "default").split(",")
    corrections = [None if c == "default" else c == "on" for c in args.corrected.split(",")]
    bits, _, per = (args.palette or "").partition(":")
    palette = PaletteOptions(int(bits), per or "channel") if bits else None
    columns = [(m, r) for m in modes for r in roundings]
    title = " / ".join("default" if c is None else "on" if c else "off" for c in corrections)
    width = 16 * len(corrections) + 2
    print(f"{'example':<16}" + "".join(f"{f'{m} {r} {title}':>{width}}" for m, r in columns))
    for name in args.examples.split(","):
        cells, forms = [], []
        for mode, rounding in columns:
            scores = []
            for corrected in corrections:
                start = time.perf_counter()
                mixed = MixedOptions(args.budget) if mode == MIXED else None
                lowered = lower_file(ROOT / "examples" / f"{name}.py", quantize=mode, mixed=mixed,
                                     weight_palette=palette, bias_correction=corrected,
                                     weight_rounding=None if rounding == "default" else rounding)
                seconds = time.perf_counter() - start
                spec = lowered.spec
                inputs = spec.test_inputs
                if args.fresh:  # seeded normal inputs of the test inputs' shapes, times --fresh-scale
                    seed = torch.Generator().manual_seed(7)
                    inputs = [tuple(args.fresh_scale * torch.randn(x.shape, generator=seed) for x in inputs[0])
                              for _ in range(args.fresh)]
                with torch.no_grad():
                    want = [[t.numpy().astype(np.float64) for _, t in flatten_outputs(spec.model(*x), name)]
                            for x in inputs]
                got = [outputs(lowered.graph, x) for x in inputs]
                signal = sum(float((w ** 2).sum()) for ws in want for w in ws)
                noise = sum(float(((g - w) ** 2).sum()) for ws, gs in zip(want, got) for w, g in zip(ws, gs))
                scores.append((10 * math.log10(signal / noise) if noise else math.inf, seconds))
                if mixed is not None:
                    forms.append(f"  {mode} {rounding} {'on' if corrected else 'off'}: " + " ".join(
                        "int4" if op.attrs.get("weight_bits") == 4 else f"lut{op.attrs['palette_bits']}"
                        if op.attrs.get("palette_bits") else "int8"
                        for op in lowered.graph.ops if op.kind in ("conv2d", "depthwise_conv2d", "linear")))
            cells.append(" / ".join(f"{db:.1f}" for db, _ in scores) + " dB ("
                         + "/".join(f"{t:.0f}" for _, t in scores) + " s)")
        print(f"{name:<16}" + "".join(f"{c:>{width}}" for c in cells), flush=True)
        for line in forms:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
