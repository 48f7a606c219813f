"""User custom ops: the user's own C kernel for a ``torch.library`` op, lowered, planned and checked like ours.

A model file registers each op it defines with :func:`custom_op` and lists the registrations in
``custom_ops = [...]`` (or passes ``custom_ops=`` to :func:`mcu.compile`); nothing is registered
process-wide. A registration names the op (``"mylib::squareplus"``), the C function and source
files of each dtype it accepts, its Python reference and what the quantizer should do with it:

* ``int8_output=("fixed", scale, zero_point)``: the int8 kernel's output has these parameters;
  ``"observe"``: they come from calibration like any activation; ``"input"``: the input's.
* no ``int8`` kernel: the op stays fp32 inside an int8 model, between a dequantize and a quantize
  that the quantizer places; the partition report and ``graph.fallbacks`` name it.

The C kernel takes one argument, ``const mcu_custom_call *`` (runtime_c/include/mcu/custom.h):
the inputs and the output in memory order, their shapes and quantization, the op's constant
arguments and its planned scratch buffer. It returns an ``mcu_status``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from mcu.errors import McuError
from mcu.reference.custom import CustomQuant  # noqa: F401  (what an int8 Python reference receives)
from mcu.emit.cvalues import flat_words
import sys
import struct

MAX_INPUTS = 4
MAX_ARGS = 8
MAX_RANK = 6
INT8_OUTPUT_MODES = ("fixed", "observe", "input")
PAYLOAD_MAGIC = b"MCUX"  # runtime_c/include/mcu/custom.h
PAYLOAD_VERSION = 1


def delegate_id(function: str) -> str:
    """The delegate registry id of a custom kernel in program files."""
    return f"custom:{function}"

# Python references: fp32 ``f(inputs, args) -> output`` on float32 arrays in logical shape;
# int8 ``f(inputs, args, quant) -> output`` on int8 arrays, ``quant`` the :class:`CustomQuant` of the call.
Reference = Callable[..., np.ndarray]


@dataclass(frozen=True)
class CustomKernel:
    """One C implementation: the function and the files that define it (compiled with the build's flags)."""

    function: str
    sources: tuple[Path, ...]


@dataclass(frozen=True)
class CustomOp:
    """A registered custom op (see the module docstring); make it with :func:`custom_op`."""

    name: str  # "namespace::op"
    fp32: CustomKernel | None
    int8: CustomKernel | None
    reference_fp32: Reference | None
    reference_int8: Reference | None
    int8_output: tuple[Any, ...] = ("observe",)
    scratch_bytes: int | Callable[[tuple[int, ...]], int] = 0  # bytes, or f(output shape) -> bytes
    in_place: bool = False  # the kernel may write its output over its first input
    # elementwise: every output element depends only on the same element of each input (all of one
    # shape), so the kernel takes any memory layout; otherwise it gets row-major tensors in logical order
    elementwise: bool = False

    def kernel(self, dtype: str) -> CustomKernel | None:
        return self.int8 if dtype == "int8" else self.fp32 if dtype == "float32" else None

    def scratch_for(self, shape: tuple[int, ...]) -> int:
        n = self.scratch_bytes(shape) if callable(self.scratch_bytes) else self.scratch_bytes
        if not isinstance(n, int) or n < 0:
            raise McuError(f"custom op {self.name}: scratch_bytes gave {n!r} for shape {list(shape)}",
                           hint="return a byte count >= 0")
        return n


def _kernel(spec: Any, name: str, what: str, base: Path) -> CustomKernel | None:
    if spec is None:
        return None
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str)):
        raise McuError(f"custom op {name}: {what} must be (function, source or [sources]), got {spec!r}",
                       hint=f'e.g. {what}=("squareplus_f32", "squareplus.c")')
    function, files = spec
    if not function.isidentifier():
        raise McuError(f"custom op {name}: {what} function {function!r} is not a C identifier")
    paths = tuple((base / Path(f)).resolve() for f in ([files] if isinstance(files, (str, Path)) else files))
    for p in paths:
        if not p.is_file():
            raise McuError(f"custom op {name}: C source {p} does not exist",
                           hint="paths are relative to the file that registers the op")
    if not paths:
        raise McuError(f"custom op {name}: {what} names no C source")
    return CustomKernel(function, paths)


def custom_op(name: str, *, fp32: Sequence[Any] | None = None, int8: Sequence[Any] | None = None,
              reference: Reference | None = None, reference_int8: Reference | None = None,
              int8_output: str | tuple[Any, ...] = "observe", scratch_bytes: int | Callable[..., int] = 0,
              in_place: bool = False, elementwise: bool = False, base: str | Path | None = None) -> CustomOp:
    """Register a ``torch.library`` op with mcu (returns the registration; list it in ``custom_ops``).

    ``fp32``/``int8``: ``(C function, source file or list of them)``, paths relative to ``base``
    (default: the folder of the calling file). ``reference``: the fp32 Python reference,
    ``reference_int8``: the integer one (required with ``int8``). ``int8_output``: "observe",
    "input" or ``("fixed", scale, zero_point)``.
    """
    root = Path(base) if base is not None else Path(sys._getframe(1).f_code.co_filename).resolve().parent
    if not isinstance(name, str) or name.count("::") != 1 or not all(p.isidentifier() for p in name.split("::")):
        raise McuError(f"custom op name {name!r} must be 'namespace::op', as given to torch.library.custom_op")
    if fp32 is None and int8 is None:
        raise McuError(f"custom op {name}: give a C kernel (fp32=..., int8=... or both)")
    if fp32 is not None and reference is None:
        raise McuError(f"custom op {name}: an fp32 kernel needs its Python reference (reference=...)")
    if int8 is not None and reference_int8 is None:
        raise McuError(f"custom op {name}: an int8 kernel needs its integer Python reference (reference_int8=...)")
    mode = (int8_output,) if isinstance(int8_output, str) else tuple(int8_output)
    if mode[0] not in INT8_OUTPUT_MODES or (mode[0] == "fixed" and len(mode) != 3) or \
            (mode[0] != "fixed" and len(mode) != 1):
        raise McuError(f"custom op {name}: int8_output must be 'observe', 'input' or ('fixed', scale, zero_point), "
                       f"got {int8_output!r}")
    if mode[0] == "fixed" and not (float(mode[1]) > 0 and -128 <= int(mode[2]) <= 127):
        raise McuError(f"custom op {name}: a fixed int8 output needs scale > 0 and a zero-point in [-128, 127]")
    return CustomOp(name=name, fp32=_kernel(fp32, name, "fp32", root), int8=_kernel(int8, name, "int8", root),
                    reference_fp32=reference, reference_int8=reference_int8, int8_output=mode,
                    scratch_bytes=scratch_bytes, in_place=in_place, elementwise=elementwise)


def check_registrations(items: Any, where: str) -> tuple[CustomOp, ...]:
    """``custom_ops`` of a model file (or the API): a list of :class:`CustomOp`, each op once."""
    if items is None:
        return ()
    ops = list(items) if isinstance(items, (list, tuple)) else [items]
    bad = [o for o in ops if not isinstance(o, CustomOp)]
    if bad:
        raise McuError(f"{where}: custom_ops must list mcu.custom_op(...) registrations, got {type(bad[0]).__name__}")
    names = [o.name for o in ops]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise McuError(f"{where}: custom op {dup[0]} is registered twice")
    return tuple(ops)


@dataclass
class CustomCallInfo:
    """What the C kernel's ``mcu_custom_call`` holds for one op, as plain values (shared by the generated C,
    the program file's payload and the host check)."""

    n_inputs: int
    numel: int
    rank: int
    shape: list[int]  # the output's logical shape, padded with 1s to MAX_RANK
    input_numel: list[int]
    input_scale: list[float]
    input_zero_point: list[int]
    output_scale: float
    output_zero_point: int
    n_args: int
    args: list[float]
    scratch_bytes: int = 0

    def params(self) -> dict[str, Any]:
        """The ``mcu_custom_params`` struct's fields in declaration order."""
        pad = MAX_INPUTS - self.n_inputs
        return {"n_inputs": self.n_inputs, "numel": self.numel, "rank": self.rank, "shape": self.shape,
                "input_numel": self.input_numel + [0] * pad,
                "input_scale": [float(s) for s in self.input_scale] + [1.0] * pad,
                "input_zero_point": self.input_zero_point + [0] * pad,
                "output_scale": float(self.output_scale), "output_zero_point": self.output_zero_point,
                "n_args": self.n_args, "args": [float(a) for a in self.args] + [0.0] * (MAX_ARGS - self.n_args),
                "scratch_bytes": self.scratch_bytes}

    def payload(self) -> bytes:
        """The program file's delegate payload: magic, version, then the params struct's memory image."""
        words = [struct.pack("<f" if isinstance(w, float) else "<i", w) for w in flat_words(self.params())]
        return PAYLOAD_MAGIC + struct.pack("<I", PAYLOAD_VERSION) + b"".join(words)


def call_info(op: Any) -> CustomCallInfo:
    """The call of IR op ``op`` (kind "custom")."""
    reg: CustomOp = op.attrs["custom"]
    ins = list(op.inputs)
    out = op.output
    if len(ins) > MAX_INPUTS or len(out.shape) > MAX_RANK:
        raise McuError(f"custom op {reg.name} ({op.name}): at most {MAX_INPUTS} tensor inputs and rank {MAX_RANK}")
    args = [float(a) for a in op.attrs.get("args", ())]

    def q(t: Any) -> tuple[float, int]:
        return (float(t.quant.scale[0]), int(t.quant.zero_point[0])) if t.quant is not None else (1.0, 0)

    return CustomCallInfo(
        n_inputs=len(ins), numel=int(math.prod(out.shape)), rank=len(out.shape),
        shape=[int(s) for s in out.physical_shape] + [1] * (MAX_RANK - len(out.shape)),
        input_numel=[int(t.numel) for t in ins], input_scale=[q(t)[0] for t in ins],
        input_zero_point=[q(t)[1] for t in ins], output_scale=q(out)[0], output_zero_point=q(out)[1],
        n_args=len(args), args=args, scratch_bytes=int(op.attrs.get("scratch_bytes", 0)))
