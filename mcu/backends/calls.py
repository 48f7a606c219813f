"""What an emitted kernel call is, shared by the emitter (mcu/emit) and the kernel-library backends
(mcu/backends): :class:`KernelCall` (the C call and its structured form for program files), the
tensor naming handed to a backend (:class:`Refs`), and the parameter helpers several backends use
(NHWC dims, clamp bounds, broadcast strides, the int8 convolution params struct).

It imports neither the emitter nor any backend, so both can import it without a circle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Union

from mcu.ir import Op, Tensor


class Refs:
    """How generated code names a tensor, and the op's scratch buffer (C expression, bytes) if it has one."""

    def __init__(self, tensor_ref: Callable[[Tensor], str], scratch: tuple[str, int] | None = None,
                 program: bool = False) -> None:
        self._tensor_ref = tensor_ref
        self.scratch = scratch
        self.program = program  # emitting for a program file: no generated-C-only kernels

    def __call__(self, t: Tensor) -> str:
        return self._tensor_ref(t)


Ref = Refs


class ScratchOperand:
    """Marks the operand that is the op's planned scratch buffer (the kernel's mcu_context)."""

    def __repr__(self) -> str:
        return "SCRATCH"


SCRATCH = ScratchOperand()


Operand = Union[Tensor, ScratchOperand, None]


@dataclass
class KernelCall:
    function: str
    args: list[str]
    sources: list[str]
    params_type: str | None = None
    params: dict | None = None
    comment: str = ""
    locals: list[str] = field(default_factory=list)  # declarations the call's arguments need
    # The same call in structured form, for program files (mcu/program): the tensor arguments in
    # kernel order (None where the C call passes NULL, SCRATCH for the op's scratch buffer) and the
    # scalar arguments that follow the params struct. See :func:`program_call`.
    operands: list[Operand] = field(default_factory=list)
    scalars: list[int | float] = field(default_factory=list)
    # External backends (mcu/backends/cmsis_nn/core.py): headers the generated C includes, folders to
    # search for them, and the library function behind a status expression (``function`` "").
    headers: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    backend_function: str = ""


@dataclass
class ProgramCall:
    """One kernel call as a program file stores it: the kernel, its operands and its parameters
    as a flat list of 32-bit words (the params struct's fields in declaration order, then the
    scalar arguments). Python floats are float32 words, ints are int32 words. ``scratch`` is
    the op's planned scratch buffer (arena, offset, bytes) when the kernel takes one."""

    function: str
    operands: list[Operand]
    params: list[int | float]
    scratch: tuple[int, int, int] | None = None


def shape4(t: Tensor) -> dict:
    """NHWC dims of a logical NCHW tensor."""
    n, c, h, w = t.shape
    return {"n": n, "h": h, "w": w, "c": c}


def bound(value: float | None, inf_sign: int) -> float:
    """A clamp bound as a float; None is the unbounded side (c_float renders both alike)."""
    return inf_sign * math.inf if value is None else float(value)


def act_bounds(op: Op) -> dict:
    act = op.attrs.get("act")
    lo, hi = act if act is not None else (None, None)
    return {"act_min": bound(lo, -1), "act_max": bound(hi, +1)}


def operand_strides(t: Tensor, out: Tensor) -> list[int]:
    offset = len(out.shape) - len(t.shape)
    strides = t.logical_strides()
    result = []
    for d in out.dim_order:
        e = d - offset
        if e < 0 or (t.shape[e] == 1 and out.shape[d] != 1):
            result.append(0)
        else:
            result.append(strides[e])
    return result


def split_at(t: Tensor, logical_axis: int) -> tuple[int, int, int]:
    """(outer, axis, inner) sizes of ``t`` around a logical axis, in memory order."""
    phys = t.physical_shape
    p = t.dim_order.index(logical_axis)
    return math.prod(phys[:p]), phys[p], math.prod(phys[p + 1:])


def physical_perm(src: Tensor, out: Tensor, logical_perm: tuple[int, ...]) -> list[int]:
    return [src.dim_order.index(logical_perm[d]) for d in out.dim_order]


def at_source(op: Op) -> str:
    return f" at {op.source}" if op.source else ""


def offsets(op: Op, *names: str) -> dict:
    return {n: int(op.attrs[n]) for n in names}


def conv_params_s8(op: Op) -> tuple[str, dict]:
    """The params struct of an int8 convolution, depthwise or linear op."""
    x, w = op.inputs[:2]
    zero_points = offsets(op, "input_offset", "output_offset", "act_min", "act_max")
    if op.kind == "linear":
        out_f, in_f = w.shape
        return "mcu_linear_s8_params", {"batch": x.numel // in_f, "in_features": in_f, "out_features": out_f,
                                        **zero_points}
    window = {
        "kernel_h": w.shape[2], "kernel_w": w.shape[3],
        "stride_h": op.attrs["stride"][0], "stride_w": op.attrs["stride"][1],
        "pad_top": op.attrs["padding"][0], "pad_left": op.attrs["padding"][1],
        "dilation_h": op.attrs["dilation"][0], "dilation_w": op.attrs["dilation"][1],
    }
    if op.kind == "depthwise_conv2d":
        return "mcu_depthwise_conv2d_s8_params", {"input": shape4(x), "output": shape4(op.output),
                                                  "ch_mult": op.attrs["ch_mult"], **window, **zero_points}
    return "mcu_conv2d_s8_params", {"input": shape4(x), "output": shape4(op.output), **window,
                                    "groups": op.attrs["groups"], **zero_points}


def quant_locals(op: Op, ref: Ref) -> list[str]:
    mult, shift = op.inputs[3], op.inputs[4]
    ctx = ("static const mcu_context ctx = {NULL, 0};" if not isinstance(ref, Refs) or ref.scratch is None
           else f"const mcu_context ctx = {{{ref.scratch[0]}, {ref.scratch[1]}}};")
    return [ctx, f"static const mcu_per_channel_quant quant = {{{ref(mult)}, {ref(shift)}}};"]


def quant_operands(op: Op) -> list[Operand]:
    """input, weight, bias, per-channel multipliers, per-channel shifts, scratch (ctx), output."""
    x, w, b, mult, shift = op.inputs[:5]
    return [x, w, b, mult, shift, SCRATCH, op.output]
