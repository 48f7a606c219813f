"""The optimized backend: our packed-weight kernel for convolutions and fully connected layers on
cores with the DSP extension (Cortex-M4/M7/M33), ``mcu_conv2d_packed_s8``.

Its weights are int16, packed at compile time in the order its dual-MAC inner loop reads them
(mcu/backends/optimized/tuned.py): faster than the portable kernels' DSP paths, at twice the flash of those
weights. It keeps the overlap contracts of the kernels it replaces (mcu/plan/contracts.py), so the
memory plan is the same. With ``--compact-weights`` it keeps the weights int8 and runs ``mcu_conv2d_compact_s8``
(mcu/backends/optimized/compact.py) instead: the flash of the portable kernels' weights, most of the speed. It
serves no op on cores without the DSP extension and on Helium cores (the portable kernels' MVE paths
serve those). It also takes the pooling between the convolutions of a 1-D network (mcu/backends/optimized/rows.py),
and a one-row signal's layout change, so that a Conv1d stack is one partition of this backend. Program files are
architecture independent: they run the portable kernel for these ops (same bits). The 16x8 (w8a16) convolutions
and fully connected layers get the same choice of layout: packed int16 weights for ``mcu_conv2d_packed_s16`` and
``mcu_linear_packed_s16`` (mcu/backends/optimized/packed16.py), or, kept int8, the portable 16x8 kernels.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Sequence

from mcu.backends.optimized import compact, rows
from mcu.backends.optimized import dwpack, packed16, tuned
from mcu.backends.optimized.options import OptimizedOptions
from mcu.backends.optimized.specialise import PackedLayer, merge_defines, packed_defines
from mcu.backends.base import Backend, Constraint, Context, Rule
from mcu.backends.calls import KernelCall
from mcu.backends.portable.core import PortableBackend
from mcu.ir import Graph, Op


_ONE_GROUP = Constraint("grouped convolution", lambda op: op.attrs.get("groups", 1) == 1)
_OHWI = Constraint("weights are not in OHWI order", lambda op: op.inputs[1].dim_order == (0, 2, 3, 1))
_MATRIX = Constraint("weights are not a matrix", lambda op: len(op.inputs[1].shape) == 2)
_INT8_IN = Constraint("input is not int8", lambda op: op.inputs[0].dtype == "int8")
_TAPS = Constraint(f"window over the kernel's {tuned.TAPS_MAX} values",
                   lambda op: tuned.padded_taps(tuned.window_taps(op)) <= tuned.TAPS_MAX)


class OptimizedBackend(Backend):
    id: ClassVar[str] = "optimized"
    rules: ClassVar[tuple[Rule, ...]] = (
        # any weight scheme: per-tensor weights come with one multiplier per channel like per-channel ones
        Rule("conv2d", ("int8",), "any", (_INT8_IN, _ONE_GROUP, _OHWI, _TAPS)),
        Rule("linear", ("int8",), "any", (_INT8_IN, _MATRIX, _TAPS)),
        # 16x8 (w8a16): the weights widened to int16 (mcu/backends/optimized/packed16.py) when packed
        Rule("conv2d", ("int16",), "any", (_ONE_GROUP, _OHWI)),
        Rule("linear", ("int16",), "any", (_MATRIX,)),
        # 3x3 stride-1 depthwise layers of small images: the planes' constants packed (dwpack.applies says which)
        Rule("depthwise_conv2d", ("int8",), "any", (_INT8_IN,)),
        Rule("max_pool2d", ("int8",), "any", (_INT8_IN, rows.ROW_WINDOW)),
        Rule("mean_hw", ("int8",), "any", (_INT8_IN,)),
        Rule("layout", ("int8",), "any", (rows.ROW_LAYOUT,)),
    )

    def options(self, ctx: Context) -> OptimizedOptions:
        return ctx.options.get(self.id) or OptimizedOptions()

    def settle(self, graph: Graph, ctx: Context) -> OptimizedOptions:
        """The weight layout, when the build leaves it open: packed while the board's flash has room."""
        options = self.options(ctx)
        if options.packed_weights is None and graph.precision is not None and graph.precision.objective == "flash":
            # --quantize mixed chose each layer's form for the fewest flash bytes, counting int8 compact
            return replace(options, packed_weights=False, chosen_for_flash=True)
        if options.packed_weights is None:
            options = replace(options, packed_weights=compact.packed_by_default(graph, ctx.board),
                              chosen_for_board=True)
        return options

    def note(self, ops: list[Op], graph: Graph, ctx: Context) -> str | None:
        """Which weight layout the build runs, and why, when any op it took has weights to lay out."""
        if not any(op.kind in tuned.KINDS and len(op.inputs) > 1 and op.inputs[1].is_constant for op in ops):
            return None
        layout = self._layout_note(graph, ctx)
        return f"{layout}; {self._placement_note(ops, ctx)}" if layout else None

    def _placement_note(self, ops: list[Op], ctx: Context) -> str:
        """The packed streams' choice by where the weights sit (Context.weights_wait)."""
        region = ctx.board.region_for("rodata")
        if not ctx.weights_wait:
            return ("weights without wait states (in fast memory or a zero-wait " f"{region.name}): int16 pairs, "
                    "pointwise pixel pairs one by one")
        if self.options(ctx).packed_weights is False:
            return f"weights in {region.name} with {region.wait_states:g} wait states a miss"
        linear = [op for op in ops if op.kind == "linear" and op.output.dtype == "int8" and op.inputs[1].data is not None]
        fit = sum(tuned.streams_bytes(op) for op in linear)
        groups = ("pointwise pixel pairs over streams larger than a flash cache in groups"
                  if tuned.groups_pay(ctx.weights_wait, ctx.weights_cache) else
                  f"pointwise pixel pairs one by one (a cache of {ctx.weights_cache} B for the weights' reads holds "
                  "no part of a large stream)")
        return (f"weights in {region.name} with {region.wait_states:g} wait states a miss: fully connected layers "
                f"stream int8 weights, two channels a word ({fit} of {len(linear)}; the others int16: a stream a "
                f"flash cache holds, or weights the layout cannot hold exactly), {groups}")

    def _layout_note(self, graph: Graph, ctx: Context) -> str | None:
        options = self.options(ctx)
        if options.chosen_for_flash:
            return ("weights kept int8 for the compact kernels: --quantize mixed counts them so, its objective "
                    "being flash (packed_weights=True in Python packs them anyway)")
        if not options.chosen_for_board:
            return ("weights packed as int16 (asked for)" if options.packed_weights
                    else "weights kept int8 for the compact kernels (--compact-weights)")
        need, rom = compact.packed_footprint(graph, ctx.board)
        region = ctx.board.region_for("rodata").name
        share = f"{need} B of constants packed, {100 * need / rom:.0f} % of the board's {rom} B of {region}"
        if options.packed_weights:
            return (f"weights packed as int16, the fastest layout: {share}, within the "
                    f"{100 * compact.PACKED_SHARE:.0f} % kept for them (--compact-weights keeps them int8)")
        return (f"weights kept int8 for the compact kernels: {share}, over the {100 * compact.PACKED_SHARE:.0f} % "
                f"kept for them (packed_weights=True in Python packs them anyway)")

    def unavailable(self, ctx: Context) -> str | None:
        if not ctx.board.dsp:
            return f"{ctx.board.core} has no DSP extension"
        return None

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.attrs.get("alias"):
            return "a view (no code)"
        if ctx.board.mve and op.output.dtype != "int16":
            # the 16x8 convolution and linear kernels have no MVE path: the packed SMLAD ones serve Helium too
            return f"{ctx.board.core} has Helium: the portable kernels' MVE paths serve it"
        why = super().refuse(op, ctx)
        if why is None and op.kind in packed16.KINDS and op.output.dtype == "int16":
            if self.options(ctx).packed_weights is False:
                return "weights kept int8: the portable 16x8 kernels read them"
            return packed16.applies(op)
        if why is None and op.kind == "depthwise_conv2d":
            if self.options(ctx).packed_weights is False:
                return "weights kept int8: the portable depthwise kernel reads them"
            return dwpack.applies(op)
        return why or (tuned.applies(op) if op.kind in tuned.KINDS else None)

    def take(self, op: Op, ctx: Context) -> None:
        if op.output.dtype == "int16":
            return  # the portable 16x8 kernels' scratch (one window column)
        if op.kind in tuned.KINDS and ctx.weights_wait:
            op.attrs[tuned.WEIGHTS_WAIT] = True  # the packed stream's layout and flags (tuned.packed_tensor)
        if op.kind in tuned.KINDS and tuned.groups_pay(ctx.weights_wait, ctx.weights_cache):
            op.attrs[tuned.GROUP_READS] = True
        if op.kind in tuned.KINDS and self.options(ctx).packed_weights is False:
            op.attrs["compact_kernel"] = True
            op.attrs["scratch_bytes"] = max(int(op.attrs.get("scratch_bytes", 0)), compact.scratch_bytes(op))

    def emit(self, op: Op, refs: Any) -> KernelCall:
        if op.kind == "depthwise_conv2d":  # not planned in place: the portable kernel's own contract
            return dwpack.emit(op, refs) or PortableBackend().emit(op, refs)
        if op.kind not in tuned.KINDS:
            return rows.emit(op, refs)
        if op.output.dtype == "int16":
            return packed16.emit(op, refs)
        return compact.emit(op, refs) if op.attrs.get("compact_kernel") else tuned.emit(op, refs)

    def kernel_defines(self, calls: Sequence[tuple[Op, KernelCall]]) -> dict[str, int]:
        """The packed kernel specialised to the model's packed layers (mcu/backends/optimized/specialise.py)."""
        layers = []
        for op, call in calls:
            if call.function == tuned.FUNCTION and call.params is not None:
                flags = int(op.attrs["packed_weights"].data[1])  # the packed tensor (tuned.packed_tensor)
                layers.append(PackedLayer.from_params(call.params, bool(flags & tuned.FLAG_RIGHT),
                                                      bool(flags & tuned.FLAG_GROUP), bool(flags & tuned.FLAG_BYTES),
                                                      bool(flags & tuned.FLAG_SCALED), bool(flags & tuned.FLAG_ROWS)))
        return packed_defines(layers)

    def merge_defines(self, parts: Sequence[dict[str, int]]) -> dict[str, int]:
        return merge_defines(parts)
