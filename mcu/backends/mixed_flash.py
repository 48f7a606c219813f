"""The flash ``--quantize mixed`` minimizes on a board: each narrowable layer's constants in the layout the
build gives them, plus the code of every kernel source the layers' forms link, counted once per source.

- int8 where the optimized backend serves the op (cores with DSP and without Helium): the compact kernels'
  stream (mcu/backends/optimized/compact.py), the layout a mixed build takes when it is left open (its
  objective is flash); elsewhere the portable kernel's int8 weights with their bias and requantization arrays.
- int16 activations (int8 weights): the portable 16x8 kernel's weights, int64 bias and requantization arrays,
  and the code of the 16x8 kernel and both borders (mcu/passes/mixed_s16.py).
- int4: two weights a byte (the s4 kernels); a look-up table: byte-padded index rows and 2^B int8 values per
  channel; each with the bias and requantization arrays.
- Kernel code: the sources the portable or optimized backend's call lists for that form (a table kernel
  brings the int8 kernel it runs), at the bytes the board's linker map gave them (mcu/backends/kernel_code.py,
  measured by bench/kernel_code.py). A board missing from that table takes the figures of a measured board
  with the same core; with none, kernel code is not counted and ``measured`` says so.

Everything else the firmware holds (model code, other kernels, the runtime) is the same whatever the layers'
forms, to within a call's few bytes, so it is left out: the totals compare configurations, they are not the
firmware's flash."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcu.backends.kernel_code import CODE_BYTES
from mcu.backends.optimized import compact, tuned
from mcu.backends.portable.conv import LUT_CALLS, LUT_FUNCTIONS, S4_CALLS
from mcu.backends.portable.variants import select_variant
from mcu.device.boards import Board, load_board
from mcu.ir import Op
from mcu.layouts import palette_row_bytes
from mcu.plan.contracts import depthwise_inplace_ok
from mcu.passes import mixed, mixed_s16

S4_FUNCTIONS = {"conv2d": "mcu_conv2d_s4", "depthwise_conv2d": "mcu_depthwise_conv2d_s4", "linear": "mcu_linear_s4"}


def _code_table(board: Board) -> tuple[dict[str, int], str | None]:
    """(source stem -> bytes, the measured board they come from, None when none fits)."""
    if board.name in CODE_BYTES:
        return CODE_BYTES[board.name], board.name
    for name in sorted(CODE_BYTES):
        if load_board(name).core == board.core:
            return CODE_BYTES[name], name
    return {}, None


def _compact_serves(op: Op, board: Board) -> bool:
    return board.dsp and not board.mve and tuned.applies(op) is None


def _side_bytes(op: Op) -> int:
    """The bias and the per-channel requantization arrays every non-compact form keeps beside its weights."""
    return sum(t.nbytes for t in op.inputs[2:5] if t is not None and t.data is not None)


@dataclass
class BoardFlash:
    """The flash objective for one board (``measured``: the board whose linker maps gave the code figures)."""

    board: Board
    code: dict[str, int] = field(init=False)
    measured: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.code, self.measured = _code_table(self.board)

    @property
    def where(self) -> str:
        """The board, and whose linker maps its code figures come from when not its own."""
        if self.measured == self.board.name:
            return self.board.name
        if self.measured is None:
            return f"{self.board.name} (no kernel code figures for its core: code not counted)"
        return f"{self.board.name} (kernel code as measured on {self.measured}, the same core)"

    def layer_bytes(self, op: Op, form: str) -> int:
        """Flash of ``op``'s constants (int8 as lowered) at ``form`` on this board."""
        w = op.inputs[1]
        channels = w.shape[0]
        taps = w.numel // max(channels, 1)
        if form == mixed.INT8:
            if _compact_serves(op, self.board):
                blocks = tuned.padded_taps(channels) // 4
                return 4 * (4 + blocks * (12 + tuned.padded_taps(taps)))
            return w.numel + _side_bytes(op)
        if form == mixed.INT4:
            return (w.numel + 1) // 2 + _side_bytes(op)
        if form == mixed_s16.A16:  # int8 weights on the portable 16x8 kernel: an int64 bias
            return w.numel + _side_bytes(op) + 4 * channels
        bits = int(form[3:])
        return channels * (palette_row_bytes(taps, bits) + (1 << bits)) + _side_bytes(op)

    def sources(self, op: Op, form: str) -> tuple[str, ...]:
        """The kernel sources (stems) ``op`` links at ``form`` on this board."""
        if form == mixed.INT4:  # on its own loops: a mixed build keeps the packed kernel out (mixed.apply)
            return tuple(s for s in S4_CALLS[S4_FUNCTIONS[op.kind]] if s != tuned.FUNCTION)
        if form == mixed_s16.A16:  # a run of them brings both borders
            return (f"mcu_{op.kind}_s16", *mixed_s16.BORDERS)
        if form != mixed.INT8:
            return LUT_CALLS[LUT_FUNCTIONS[op.kind]]
        if _compact_serves(op, self.board):
            return ((compact.LINEAR_SOURCE if op.kind == "linear" else compact.SOURCE).removesuffix(".c"),)
        # a depthwise layer the memory plan can run in place is planned so (ds_cnn's are, on every board)
        return (select_variant(op, depthwise_inplace_ok(op)).source.removesuffix(".c"),)

    def code_bytes(self, layers: list[tuple[Op, str]]) -> int:
        """The code of every source the (op, form) pairs link, each once."""
        stems = {s for op, form in layers for s in self.sources(op, form)}
        return sum(self.code.get(s, 0) for s in stems)
