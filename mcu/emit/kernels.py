"""Map each IR op to one call of a C kernel, through the backend the partitioner gave it.

The op's backend (``op.attrs["backend"]``, set by :func:`mcu.backends.base.partition`; "portable"
when the graph was not partitioned) builds the :class:`~mcu.backends.calls.KernelCall`; the registry
(mcu/backends/registry.py) finds it by id, so this module imports no backend at load time and a new
kernel library needs no change here. Program files are architecture independent: every op takes
the portable backend's call there, whatever backend the generated C uses.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from mcu.backends.calls import SCRATCH, KernelCall, Operand, ProgramCall, Ref, Refs, ScratchOperand
from mcu.emit.cvalues import c_initializer, flat_words
from mcu.ir import Op, Tensor

__all__ = ["SCRATCH", "KernelCall", "Operand", "ProgramCall", "Ref", "Refs", "ScratchOperand", "emit_call",
           "kernel_defines", "merge_defines", "program_call"]

PORTABLE = "portable"


def emit_call(op: Op, ref: Ref) -> KernelCall | None:
    """The kernel call for ``op``, or None for ops that emit no code (aliasing views)."""
    if op.attrs.get("alias"):
        return None
    from mcu.backends.registry import backend  # lazy: the backends import mcu.backends.calls, never this module

    backend_id = PORTABLE if getattr(ref, "program", False) else op.attrs.get("backend", PORTABLE)
    call = backend(backend_id).emit(op, ref)
    call.comment = f"{op.name}: {op.kind}" + (f" ({op.source})" if op.source else "")
    return call


def call_block(op: Op, refs: Ref, indent: str) -> tuple[list[str], KernelCall]:
    """One kernel call of a schedule's loop body as a C block at ``indent``: its parameters as a static
    constant (each call site its own, since the row counts differ), its locals, the checked call."""
    call = emit_call(op, refs)
    assert call is not None
    lines = [f"{indent}{{"]
    if call.params_type:
        lines.append(f"{indent}    static const {call.params_type} params = {c_initializer(call.params)};")
    lines += [f"{indent}    {decl}" for decl in call.locals]
    lines.append(f"{indent}    MCU_CHECK({call.function}({', '.join(call.args)}));")
    lines.append(f"{indent}}}")
    return lines, call


def kernel_defines(emitted: Sequence[tuple[Op, KernelCall]]) -> dict[str, dict[str, int]]:
    """Per backend (in the order the calls first use it), the compile definitions that specialise its
    kernels to these calls of one model's generated C (:meth:`mcu.backends.base.Backend.kernel_defines`);
    backends that specialise nothing are left out."""
    from mcu.backends.registry import backend  # lazy, as in emit_call

    by_backend: dict[str, list[tuple[Op, KernelCall]]] = {}
    for op, call in emitted:
        by_backend.setdefault(op.attrs.get("backend", PORTABLE), []).append((op, call))
    defines = {name: backend(name).kernel_defines(calls) for name, calls in by_backend.items()}
    # Two backends may specialise one kernel source (the packed convolution: the optimized backend's int8
    # layers and the portable backend's 4-bit ones widened into its stream); the first one's merge of both
    # serves both, and the definitions go to that one alone.
    names = list(defines)
    for i, first in enumerate(names):
        for other in names[i + 1:]:
            if set(defines[first]) & set(defines[other]):
                merged = backend(first).merge_defines([defines[first], defines[other]])
                defines[first] = {**defines[first], **merged}
                defines[other] = {k: v for k, v in defines[other].items() if k not in merged}
    return {name: d for name, d in defines.items() if d}


def merge_defines(parts: Sequence[Mapping[str, Mapping[str, int]]]) -> dict[str, int]:
    """The compile definitions of one library of several methods, from each method's :func:`kernel_defines`:
    each backend merges its own (:meth:`mcu.backends.base.Backend.merge_defines`)."""
    from mcu.backends.registry import backend  # lazy, as in emit_call

    names = list(dict.fromkeys(name for part in parts for name in part))
    return {define: value for name in names
            for define, value in backend(name).merge_defines([part.get(name, {}) for part in parts]).items()}


def program_call(op: Op, place: Callable[[Tensor], tuple[int, int]],
                 scratch: tuple[int, int, int] | None = None) -> ProgramCall | None:
    """The structured form of :func:`emit_call` (None for ops that emit no code).

    ``place`` (a tensor's arena and offset) and ``scratch`` (arena, offset, bytes) come from the
    memory plan, as for the generated C, so both choose the same kernel variant (in-place ones
    compare placements) and pass it the same parameters. Every params struct holds only
    int32/float fields (and nested mcu_shape4), so its fields in declaration order are its memory
    image; the dict of each emitter lists them in that order.
    """
    def ref(t: Tensor) -> str:
        return f"const:{id(t)}" if t.is_constant else "{}@{}:{}".format(t.dtype, *place(t))

    refs = Refs(ref, None if scratch is None else (f"arena{scratch[0]}:{scratch[1]}", scratch[2]), program=True)
    call = emit_call(op, refs)
    if call is None:
        return None
    words = (flat_words(call.params) if call.params is not None else []) + list(call.scalars)
    uses_scratch = any(o is SCRATCH for o in call.operands)
    return ProgramCall(call.function, list(call.operands), words, scratch if uses_scratch else None)
