"""Look-up-table weights (``--weight-palette BITS``, after static int8 quantization): each output channel
of a convolution (one group, or depthwise) or linear layer with int8 per-channel weights keeps at most
2^BITS distinct weight values, chosen by 1-D k-means over its int8 codes.

The op's int8 weight tensor is rewritten to the chosen values, so its biases, requantization and the
integer reference (which computes from the weight values) are unchanged; the op gets
``attrs["palette_bits"]``, and the portable backend's emitters store those values as indices and
per-channel tables (mcu/layouts.py, pack_palette) for its look-up-table kernels.

The k-means runs on the channel's int8 codes (its real weights divided by the channel's scale, rounded
by the quantizer), weighted by how often each code occurs: Lloyd's iterations from centroids at evenly
spaced quantiles, which is deterministic; the centroids are then rounded into [-127, 127] and every code
goes to its nearest one (the lower on a tie).

With ``shared`` (``--palette-per tensor``) one table serves every channel of a tensor: the same k-means
over all the tensor's int8 codes. The codes stay on each channel's own scale (the quantizer made every
channel span [-127, 127]), so one table of codes fits them all without rescaling the channels, which keeps
the biases, multipliers and shifts as they are; the op gets ``attrs["palette_shared"]``.

The same goes for the 16x8 ops (``--quantize w8a16``): int8 per-channel weights, int16 activations."""

from __future__ import annotations

import numpy as np

from mcu.errors import McuError
from mcu.ir import Graph, Op
from mcu.layouts import channel_rows, set_channel_rows

BITS = (2, 3, 4)
_ITERATIONS = 50


def eligible(op: Op) -> bool:
    """An int8 or 16x8 convolution with one group, a depthwise convolution or a linear layer whose weights
    are an int8 constant (not w4a8's 4-bit ones)."""
    if op.kind not in ("conv2d", "depthwise_conv2d", "linear") or not op.outputs \
            or op.output.dtype not in ("int8", "int16"):
        return False
    if len(op.inputs) < 5 or op.attrs.get("weight_bits") == 4 or op.attrs.get("alias"):
        return False
    w = op.inputs[1]
    if not w.is_constant or w.dtype != "int8" or w.data is None:
        return False
    return op.kind != "conv2d" or op.attrs.get("groups", 1) == 1


def centroids(codes: np.ndarray, bits: int) -> np.ndarray:
    """At most 2^bits integer centroids in [-127, 127] for one channel's int8 ``codes``, ascending."""
    values, counts = np.unique(np.asarray(codes, dtype=np.int64), return_counts=True)
    k = 1 << bits
    if values.size <= k:
        return values
    weights = counts.astype(np.float64)
    cumulative = np.cumsum(weights) / weights.sum()
    centres = values[np.minimum(np.searchsorted(cumulative, (np.arange(k) + 0.5) / k), values.size - 1)]
    centres = np.unique(centres).astype(np.float64)
    for _ in range(_ITERATIONS):
        which = _nearest(values.astype(np.float64), centres)
        sums = np.bincount(which, weights=weights * values, minlength=centres.size)
        mass = np.bincount(which, weights=weights, minlength=centres.size)
        moved = np.where(mass > 0, sums / np.maximum(mass, 1e-300), centres)
        if np.allclose(moved, centres):
            break
        centres = moved
    return np.unique(np.clip(np.round(centres), -127, 127)).astype(np.int64)


def _nearest(values: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of each value's nearest centre (ascending centres; a tie goes to the lower)."""
    bounds = (centres[1:] + centres[:-1]) / 2
    return np.searchsorted(bounds, values, side="left")


def palettize_row(codes: np.ndarray, bits: int) -> np.ndarray:
    """One channel's codes replaced by their nearest centroid."""
    centres = centroids(codes, bits)
    return centres[_nearest(np.asarray(codes, dtype=np.float64), centres.astype(np.float64))]


def palettize_weights(graph: Graph, bits: int, shared: bool = False) -> Graph:
    """Rewrites every eligible op's weights to at most 2^bits values per output channel, or per tensor with
    ``shared`` (in place)."""
    if bits not in BITS:
        raise McuError(f"--weight-palette {bits}: a palette of 2, 3 or 4 bits is supported",
                       hint="use --weight-palette 2, 3 or 4")
    for op in graph.ops:
        if not eligible(op):
            continue
        w = op.inputs[1]
        rows = channel_rows(w)
        if shared:
            set_channel_rows(w, palettize_row(rows.reshape(-1), bits).reshape(rows.shape))
            op.attrs["palette_shared"] = True
        else:
            set_channel_rows(w, np.stack([palettize_row(r, bits) for r in rows]))
        op.attrs["palette_bits"] = bits
    return graph
