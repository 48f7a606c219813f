"""The custom backend: the user's own C kernels (mcu/capture/custom_ops.py), a kernel library like portable.

It takes exactly the ``custom`` ops whose registration has a kernel for the op's dtype; each becomes
one direct call of the user's function in the generated C (its sources compiled with the build's
flags, linked only when an op uses them) with an ``mcu_custom_params`` struct computed here. In a
program file the same call runs through the delegate registry (see mcu/program/writer.py and
runtime_c/include/mcu/custom.h), since an interpreter cannot know a user's function by number.
"""

from __future__ import annotations

from typing import ClassVar

from mcu.backends.base import Backend, Context
from mcu.backends.calls import SCRATCH, KernelCall, Ref
from mcu.capture.custom_ops import call_info
from mcu.ir import Op


class CustomBackend(Backend):
    id: ClassVar[str] = "custom"

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.kind != "custom":
            return f"no {self.id} support for {op.kind}"
        reg = op.attrs["custom"]
        dtype = op.output.dtype
        if reg.kernel(dtype) is None:
            return f"{reg.name} has no {dtype} kernel registered"
        return None

    def take(self, op: Op, ctx: Context) -> None:
        n = op.attrs["custom"].scratch_for(tuple(op.output.shape))
        if n:
            op.attrs["scratch_bytes"] = max(int(op.attrs.get("scratch_bytes", 0)), n)

    def emit(self, op: Op, refs: Ref) -> KernelCall:
        reg = op.attrs["custom"]
        kernel = reg.kernel(op.output.dtype)
        info = call_info(op)
        inputs = ", ".join(refs(t) for t in op.inputs)
        scratch = refs.scratch if getattr(refs, "scratch", None) is not None else None
        scratch_c = f"{scratch[0]}, {scratch[1]}" if scratch is not None else "NULL, 0"
        return KernelCall(
            kernel.function, ["&call"], [str(s) for s in kernel.sources], "mcu_custom_params", info.params(),
            locals=[f"extern mcu_status {kernel.function}(const mcu_custom_call *call);",
                    f"const void *const inputs[{len(op.inputs)}] = {{{inputs}}};",
                    f"const mcu_custom_call call = {{&params, inputs, {refs(op.output)}, {scratch_c}}};"],
            operands=[*op.inputs, op.output, *([SCRATCH] if scratch is not None else [])],
            headers=["mcu/custom.h"])
