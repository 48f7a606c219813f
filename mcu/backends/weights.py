"""Constants the backends derive from an op's weights, made once and kept on the op so that every emission
(generated C, program file) names the same tensor."""

from __future__ import annotations

from mcu.ir import Op, Tensor
from mcu.layouts import pack_s4


def s4_weights(op: Op, index: int = 1) -> Tensor:
    """The op's 4-bit weights (its input ``index``: a recurrent layer has two matrices) packed two a byte, low
    nibble first, in its int8 weights' memory order and continuous across rows: CMSIS-NN's s4 layout, which our
    4-bit kernels read too."""
    key = "s4_weights" if index == 1 else f"s4_weights_{index}"
    cached = op.attrs.get(key)
    if isinstance(cached, Tensor):
        return cached
    w = op.inputs[index]
    assert w.data is not None
    data = pack_s4(w.data)
    t = Tensor(name=f"{w.name}_s4", shape=(data.size,), dtype="int8", data=data)
    op.attrs[key] = t
    return t
