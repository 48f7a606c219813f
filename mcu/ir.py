"""The compiler's intermediate representation.

A :class:`Graph` is a list of :class:`Op` in execution order over
:class:`Tensor` objects. Shapes are logical (PyTorch order); ``dim_order``
says how a tensor is laid out in memory (``(0, 2, 3, 1)`` is channels-last),
so a kernel's physical shapes are derived, never stored twice. Constants carry
their data already in physical layout. Views alias the buffer of their base.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

# (int64: the 16x8 layers' biases, constants only)
DTYPE_BYTES = {"float32": 4, "int8": 1, "int16": 2, "int32": 4, "uint8": 1, "int64": 8}
NUMPY_DTYPES = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "uint8": np.uint8,
                "int64": np.int64}
CHANNELS_LAST = (0, 2, 3, 1)


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization ``real = scale * (q - zero_point)``.

    Per-tensor when ``axis`` is None, else one scale (and zero-point) per index
    along logical dimension ``axis``.
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None
    qmin: int = -128
    qmax: int = 127

    @property
    def per_tensor(self) -> bool:
        return self.axis is None


@dataclass(eq=False)
class QConst:
    """The integer form of a quantized constant (a weight behind a dequantize node).

    Arrays have the constant's logical shape; ``scale`` and ``zero_point`` are
    per element so that data-movement folding (transpose, view) carries them
    along unchanged. :meth:`per_channel` recovers one value per index of an axis.
    """

    values: np.ndarray  # int8 (int16 where qmax is 32767: w8a16's constant operands)
    scale: np.ndarray  # float64, same shape
    zero_point: np.ndarray  # int64, same shape
    qmax: int = 127  # the largest code the quantizer allowed (7: 4-bit weights on int8 codes)

    def per_channel(self, axis: int) -> tuple[np.ndarray, np.ndarray]:
        moved_s = np.moveaxis(self.scale, axis, 0).reshape(self.scale.shape[axis], -1)
        moved_z = np.moveaxis(self.zero_point, axis, 0).reshape(self.zero_point.shape[axis], -1)
        if not (np.all(moved_s == moved_s[:, :1]) and np.all(moved_z == moved_z[:, :1])):
            raise ValueError(f"quantization parameters vary along more than axis {axis}")
        return moved_s[:, 0].copy(), moved_z[:, 0].copy()


@dataclass(eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    dim_order: tuple[int, ...] = ()
    data: np.ndarray | None = None  # constants only, in physical layout
    alias_of: Tensor | None = None  # a view shares its base's bytes
    quant: QuantParams | None = None
    qconst: QConst | None = None  # constants only: the int8 weights this float constant dequantizes
    is_input: bool = False
    is_output: bool = False

    def __post_init__(self) -> None:
        if not self.dim_order:
            self.dim_order = tuple(range(len(self.shape)))

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[d] for d in self.dim_order)

    def base(self) -> Tensor:
        t = self
        while t.alias_of is not None:
            t = t.alias_of
        return t

    def logical_strides(self) -> tuple[int, ...]:
        """Element strides of each logical dimension in this tensor's memory layout."""
        strides = [0] * len(self.shape)
        step = 1
        for d in reversed(self.dim_order):
            strides[d] = step
            step *= self.shape[d]
        return tuple(strides)

    def is_contiguous_layout(self) -> bool:
        """True when the bytes are in logical row-major order (size-1 dims ignored)."""
        order = [d for d in self.dim_order if self.shape[d] != 1]
        return order == sorted(order)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.dtype}{list(self.shape)})"


@dataclass(eq=False)
class Op:
    kind: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    source: str = ""  # the user's source line this op came from

    @property
    def output(self) -> Tensor:
        return self.outputs[0]

    def __repr__(self) -> str:
        ins = ", ".join(t.name for t in self.inputs)
        outs = ", ".join(t.name for t in self.outputs)
        return f"{outs} = {self.kind}({ins})"


@dataclass(frozen=True)
class LayerPrecision:
    """One layer's precision under ``--quantize mixed``: ``weights`` int8, int4 or lutB (B-bit indices into a
    table per output channel), their bytes, and the model's score with this layer alone at that precision."""

    op: str
    kind: str
    weights: str
    weight_bytes: int
    instructions: int  # estimated
    score_alone: float  # int16 activations: the score of its run of layers at int16, the rest int8
    activations: str = "int8"  # or int16 (its weights int8, borders to int8 tensors)


@dataclass(frozen=True)
class PrecisionChoice:
    """What ``--quantize mixed`` chose: the metric (``sqnr_db`` or the eval metric's name, in percent), the
    budget, the all-int8 score and the chosen configuration's, measured, and each layer's choice."""

    metric: str
    budget: float
    objective: str
    int8_score: float
    score: float
    samples: int
    layers: tuple[LayerPrecision, ...]
    code_bytes: int = 0  # the code of the kernels the layers' forms link, each once, on the board it chose for
    int8_bytes: int = 0  # all-int8's layer bytes and kernel code there (flash objective), to compare with
    configurations: int = 0  # how many the paths offered
    board: str = ""  # whose flash was counted (flash objective)

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "budget": self.budget, "objective": self.objective,
                "int8_score": self.int8_score, "score": self.score, "samples": self.samples,
                "weight_bytes": sum(layer.weight_bytes for layer in self.layers),
                "code_bytes": self.code_bytes, "int8_bytes": self.int8_bytes, "board": self.board,
                "layers": [{"op": layer.op, "kind": layer.kind, "weights": layer.weights,
                            "weight_bytes": layer.weight_bytes, "instructions": layer.instructions,
                            "score_alone": layer.score_alone, "activations": layer.activations}
                           for layer in self.layers]}

    def lines(self) -> list[str]:
        """The per-layer table the build report and ``mcu debug`` print."""
        unit, points = ("dB", "dB") if self.metric == "sqnr_db" else ("%", "points")
        out = [f"mixed precision ({self.objective}): {self.metric} {self.score:.2f} {unit} against int8's "
               f"{self.int8_score:.2f} {unit}, budget {self.budget:g} {points} below it "
               f"({self.samples} samples)",
               f"  {'layer':<28} {'kind':<17} {'weights':<7} {'acts':<5} {'bytes':>8} {'alone':>9}"]
        out += [f"  {layer.op:<28} {layer.kind:<17} {layer.weights:<7} {layer.activations:<5} "
                f"{layer.weight_bytes:>8} {layer.score_alone:>7.2f} {unit}" for layer in self.layers]
        if self.objective == "flash":
            own = sum(layer.weight_bytes for layer in self.layers) + self.code_bytes
            out.append(f"  layers' constants and their kernels' code on {self.board}: {own} B (all-int8: "
                       f"{self.int8_bytes} B), of it {self.code_bytes} B of kernel code")
        return out


@dataclass(eq=False)
class Graph:
    inputs: list[Tensor]
    outputs: list[Tensor]
    ops: list[Op]
    name: str = "model"
    fallbacks: list[tuple[str, str]] = field(default_factory=list)  # (op, reason) left in fp32 by int8 lowering
    # Model state: buffer name -> the tensor that keeps its value across calls, shared by all
    # methods of a model (mcu/frontend/state.py); written in place, never an input or a constant.
    state: dict[str, Tensor] = field(default_factory=dict)
    # The user's name of each output (a dict key, a tuple path: mcu.capture.loader.flatten_outputs), when known.
    output_names: list[str] = field(default_factory=list)
    # --quantize mixed: each layer's chosen precision (mcu/passes/mixed_choice.py); None in every other mode.
    precision: PrecisionChoice | None = None

    def tensors(self) -> Iterator[Tensor]:
        """Every tensor once, inputs first, then in op order."""
        seen: set[int] = set()
        for t in [*self.inputs, *(t for op in self.ops for t in (*op.inputs, *op.outputs))]:
            if id(t) not in seen:
                seen.add(id(t))
                yield t

    def constants(self) -> list[Tensor]:
        return [t for t in self.tensors() if t.is_constant]

    def producer(self, tensor: Tensor) -> Op | None:
        for op in self.ops:
            if any(o is tensor for o in op.outputs):
                return op
        return None

    def users(self, tensor: Tensor) -> list[Op]:
        return [op for op in self.ops if any(i is tensor for i in op.inputs)]

    def replace_uses(self, old: Tensor, new: Tensor, after: Op | None = None) -> None:
        """Make every op (after ``after``, if given) read ``new`` instead of ``old``."""
        started = after is None
        for op in self.ops:
            if started:
                op.inputs = [new if t is old else t for t in op.inputs]
            elif op is after:
                started = True
        self.outputs = [new if t is old else t for t in self.outputs]
        if old.is_output:
            new.is_output = True

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.kind] = counts.get(op.kind, 0) + 1
        return counts

    def dump(self) -> str:
        return "\n".join(repr(op) for op in self.ops)
