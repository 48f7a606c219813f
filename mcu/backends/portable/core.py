"""The portable backend: our own C kernels (runtime_c/kernels), the default and the fallback for every op.

Each IR op becomes one call of a C kernel: :data:`EMITTERS`, keyed by (op kind, output dtype), builds
the :class:`~mcu.backends.calls.KernelCall` (the C function, its parameter struct as an initializer computed
from physical (memory-order) shapes, the argument expressions and the kernel sources it needs).
The support table is that key set, so what this backend declares and what it can emit cannot drift.
int8 convolution, depthwise and fully connected layers pick among kernels with different contracts
through the variant table (mcu/backends/portable/variants.py); each kernel's architecture paths (plain C,
DSP, Helium) are chosen in C by the board's ``-mcpu``, so the same call serves every core and every
program file.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Mapping, Sequence

from mcu.backends.base import SPEED_SCRATCH, Backend, Context, Rule
from mcu.backends.calls import KernelCall, Ref, at_source
from mcu.backends.portable import conv, elementwise, movement, norm, pool, recurrent, resample, select
from mcu.errors import McuError
from mcu.ir import Op

Emitter = Callable[[Op, Ref], KernelCall]

# Every op family's emitters: the family's module in this package builds its kernel calls.
EMITTERS: dict[tuple[str, str], Emitter] = {
    **conv.EMITTERS, **pool.EMITTERS, **elementwise.EMITTERS, **norm.EMITTERS, **movement.EMITTERS,
    **select.EMITTERS, **resample.EMITTERS, **recurrent.EMITTERS,
}


class PortableBackend(Backend):
    """Our C kernels: takes every op it has a kernel for (and every aliasing view, which emits no code)."""

    id: ClassVar[str] = "portable"
    weights_s4: ClassVar[bool] = True  # mcu_conv2d_s4, mcu_depthwise_conv2d_s4, mcu_linear_s4
    weights_lut: ClassVar[bool] = True  # mcu_conv2d_lut_s8, mcu_depthwise_conv2d_lut_s8, mcu_linear_lut_s8
    rules: ClassVar[tuple[Rule, ...]] = tuple(Rule(kind, (dtype,)) for kind, dtype in EMITTERS)

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.attrs.get("alias"):
            return None  # a view of its input's bytes: nothing to run
        why = super().refuse(op, ctx)
        if why is not None and op.outputs:
            return f"no {op.outputs[0].dtype} kernel for {op.kind}"
        return why

    def emit(self, op: Op, refs: Any) -> KernelCall:
        key = (op.kind, op.output.dtype)
        if key not in EMITTERS:
            raise McuError(f"no {op.output.dtype} kernel for {op.kind}{at_source(op)}")
        return EMITTERS[key](op, refs)

    def take(self, op: Op, ctx: Context) -> None:
        # --compact-weights (the optimized backend's packed_weights False) keeps the packed kernel's code out of a
        # 4-bit build too: its convolutions run their own loops.
        options = ctx.options.get("optimized")
        packed = getattr(options, "packed_weights", None)
        if op.attrs.get("weight_bits") == 4 and packed is False:
            op.attrs["s4_stream"] = False
        elif op.attrs.get("weight_bits") == 4 and packed is True:
            op.attrs.pop("s4_stream", None)  # packed weights: a mixed build's int4 layers stream too
        scratch = (conv.mve_conv3_scratch_bytes(op) or conv.mve_s4_scratch_bytes(op)) if ctx.board.mve else 0
        if scratch and not op.attrs.get("scratch_bytes"):
            # for speed only: a build that must save RAM plans without it (mcu/pipeline.py)
            op.attrs["scratch_bytes"] = scratch
            op.attrs[SPEED_SCRATCH] = True

    def kernel_defines(self, calls: Sequence[tuple[Op, KernelCall]]) -> dict[str, int]:
        """The 4-bit convolutions' definitions (conv.s4_defines): the packed kernel specialised to those that widen
        their weights into its stream, or that kernel left out."""
        return conv.s4_defines(calls)

    def merge_defines(self, parts: Sequence[Mapping[str, int]]) -> dict[str, int]:
        return conv.s4_merge_defines(parts)
