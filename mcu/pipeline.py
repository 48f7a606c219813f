"""The whole compiler, in order.

    model.py -> capture (torch.export) -> Edge (Core ATen, verified)
             -> mcu IR -> lowering passes -> partition (backends) -> memory plan -> C library

Each stage is one module with one entry point; the lowering passes are the
ordered list ``LOWERING`` below, with the reason for each position.
"""

from __future__ import annotations

from typing import Callable

from mcu.backends.base import SPEED_SCRATCH, BackendOptions, Context, PartitionReport, partition
from mcu.backends.mixed_flash import BoardFlash
from mcu.backends.registry import resolve as resolve_backends
from mcu.device.boards import Board, load_board
from mcu.device.placement import weights_cache_bytes, weights_wait
from mcu.capture.export import capture, check_user_outputs, torch_pytree_deprecation_hidden
from mcu.capture.edge import to_edge
from mcu.emit.c_model import GeneratedLibrary, render_library
from mcu.errors import McuError
from mcu.frontend.lower import from_exported
from mcu.ir import Graph
from mcu.capture.loader import ModelSpec
from mcu.plan.fused import find_chains, with_fused
from mcu.plan.prefix import (KIND as PREFIX_KIND, PrefixSchedule, candidate_ends, choose_schedule as choose_prefix,
                             with_prefix)
from mcu.plan.fusion import FusionChoice, FusionCosts, choose_fastest, choose as choose_fusion
from mcu.plan.memory import MemoryPlan, plan_memory
from mcu.passes.fold_batch_norm import fold_batch_norm
from mcu.passes.fuse_activations import fuse_activations
from mcu.passes.conv_views import fold_conv_pads, sink_unit_views
from mcu.passes.layout import assign_layouts
from mcu.passes.mixed_choice import Metric as MixedMetric, choose_precision
from mcu.passes.palette import palettize_weights
from mcu.passes.quantized.attention import fold_softmax_masks
from mcu.passes.quantized.core import lower_quantized
from mcu.passes.quantized.recurrent import narrow_weights_s4
from mcu.passes.views import alias_views
from mcu.passes.weights import quantize_linear_weights
from mcu.passes.weights_int4 import lower_int4_linear, lower_int8_embedding
from mcu.progress import stage
from mcu.quantize import modes
from mcu.quantize.flow import is_prequantized, quantize_static
from mcu.quantize.sensitivity import scorer as sensitivity_scorer
from mcu.quantize.torchao_int4 import int4_weight_model


Pass = Callable[[Graph], Graph]

LOWERING: list[tuple[str, Pass]] = [
    # A Conv1d's views ([N, C, L] <-> [N, C, 1, L]) move past its activation and (de)quantize nodes,
    # so what follows sees a 2-D convolution as it would in a Conv2d model.
    ("sink_unit_views", sink_unit_views),
    # Batch norm sits between a convolution and its ReLU: fold it first so the ReLU can fuse.
    ("fold_batch_norm", fold_batch_norm),
    # Clamps fuse into their producer's output (still float ops in a quantized graph, before
    # the quantize that follows them), so the int8 lowering sees conv+relu -> quantize.
    ("fuse_activations", fuse_activations),
    # A constant attention mask (a where writing -inf before a quantized softmax) becomes the softmax's own,
    # so the int8 lowering sees dequantize -> softmax -> quantize.
    ("fold_softmax_masks", fold_softmax_masks),
    # dequantize -> op -> quantize becomes one int8 op; a no-op on fp32 graphs.
    ("lower_quantized", lower_quantized),
    # Zero padding written before a convolution (a causal Conv1d's F.pad) becomes the convolution's
    # own; after the int8 lowering, which gives the padding its int8 fill.
    ("fold_conv_pads", fold_conv_pads),
    # Memory layouts (channels-last) and the layout changes between ops that need them.
    ("assign_layouts", assign_layouts),
    # Reshapes become aliases; needs final layouts to know their bytes are row-major.
    ("alias_views", alias_views),
]


def lower(graph: Graph) -> Graph:
    for _name, run in LOWERING:
        graph = run(graph)
    return graph


DEFAULT_BOARD = "mps2-an505"


def to_graph(spec: ModelSpec, quantize: str, weight_palette: modes.Palette | None = None,
             mixed: modes.MixedOptions | None = None, board: Board | None = None,
             bias_correction: bool | None = None, weight_rounding: str | None = None) -> Graph:
    """``weight_palette``: look-up-table weights of that many bits (or modes.PaletteOptions: and a table per
    channel or per tensor) after the lowering (mcu/passes/palette.py); static int8 and w8a16 only. ``mixed``: with ``quantize`` mixed, the budget and objective
    of each layer's weight precision (mcu/passes/mixed_choice.py), its flash counted on ``board`` (default
    mps2-an505). ``bias_correction``: the convolution and linear biases corrected for their rounded weights
    (mcu/quantize/bias_correction.py), None: the mode's default; a model quantized already keeps its own.
    ``weight_rounding``: "nearest", "gptq" (mcu/quantize/gptq.py) or "searched" (mcu/quantize/weight_scales.py),
    None: the mode's default."""
    modes.check(quantize)
    modes.check_palette(quantize, weight_palette)
    modes.check_mixed(quantize, mixed)
    corrected = modes.corrects_biases(quantize, bias_correction)
    rounding = modes.weight_rounding(quantize, weight_rounding)
    where = str(spec.path) if spec.path else spec.name
    # before quantizing: the sensitivity's fp32 outputs come from the float model
    scorer = sensitivity_scorer(spec) if quantize == modes.MIXED else None
    if modes.is_static(quantize) and not is_prequantized(spec.model):
        with stage("quantize"):
            captured = quantize_static(spec.model, spec.example_inputs, spec.calibration, where=where,
                                       custom_ops=spec.custom_ops, example_line=spec.lines.get("example_inputs"),
                                       weight_bits=modes.weight_bits(quantize),
                                       act_bits=modes.activation_bits(quantize),
                                       bias_correction=corrected, weight_rounding=rounding)
    elif modes.int4_weights(quantize):  # torchao's groupwise int4 weights
        with stage("quantize"):
            captured = int4_weight_model(spec.model)
    else:
        captured = spec.model
    with stage("capture"), torch_pytree_deprecation_hidden():
        ep = capture(captured, spec.example_inputs, where, spec.lines.get("example_inputs"))
        check_user_outputs(ep, where)
        ep = to_edge(ep)
    with stage("lower"):
        graph = lower(from_exported(ep, name=spec.name, custom_ops=spec.custom_ops))
        if modes.int8_weights(quantize):
            graph = quantize_linear_weights(graph, dynamic=modes.is_dynamic(quantize))
        if modes.int4_weights(quantize):
            graph = lower_int8_embedding(lower_int4_linear(graph, dynamic=modes.is_dynamic(quantize)))
        if modes.weight_bits(quantize) == 4:
            graph = narrow_weights_s4(graph)
        if weight_palette is not None:
            options = modes.palette_options(weight_palette)
            assert options is not None
            graph = palettize_weights(graph, options.bits, options.per == "tensor")
    if scorer is not None and mixed is not None:
        with stage("mixed precision"):
            flash = BoardFlash(board if board is not None else load_board(DEFAULT_BOARD))
            graph = choose_precision(graph, scorer.score, MixedMetric(scorer.metric, scorer.sqnr), mixed.budget,
                                     mixed.objective, scorer.samples, flash)
    return graph


def fits(board: Board, memory: MemoryPlan) -> bool:
    capacity = dict(board.arena_regions())
    return all(arena.plan.arena_size <= capacity.get(arena.region, 0) for arena in memory.arenas)


def check_fits(board: Board, memory: MemoryPlan) -> None:
    """Reject a model whose arenas cannot fit in the board's RAM regions (the main one next to the stack)."""
    capacity = dict(board.arena_regions())
    for arena in memory.arenas:
        available = capacity.get(arena.region, 0)
        if arena.plan.arena_size > available:
            largest = max(arena.plan.buffers, key=lambda b: b.size)
            where = "RAM after a {} B stack".format(board.stack_bytes) if arena.region == "ram" else \
                f"{arena.region} memory"
            raise McuError(
                f"model does not fit {board.name}: its arena needs {arena.plan.arena_size} B but the board has "
                f"{available} B of {where} ({arena.plan.arena_size - available} B too many; "
                f"the largest buffer is {largest.name}, {largest.size} B)",
                hint="use a smaller model or input, quantize to int8, or pick a board with more RAM")


def _weight_bytes(graph: Graph) -> tuple[int, int]:
    """(fp32, int8) bytes of the convolution and linear weights, the tensors that narrower weights shrink."""
    fp32 = int8 = 0
    for op in graph.ops:
        if op.kind in ("conv2d", "linear") and len(op.inputs) > 1 and op.inputs[1].is_constant:
            w = op.inputs[1]
            if w.dtype == "float32":
                fp32 += w.nbytes
            elif w.dtype == "int8" and op.attrs.get("weight_bits") != 4:
                int8 += w.nbytes
    return fp32, int8


def smallest_configuration(graph: Graph, need: int, room: int) -> str:
    """A clause naming the narrowest-weight quantization that would bring ``need`` bytes of read-only memory
    (constants, or a whole firmware) within ``room``, or what even the narrowest needs ("" when the model's
    weights cannot narrow further): int8 keeps a quarter of fp32 weights' bytes, w4a8 an eighth."""
    fp32, int8 = _weight_bytes(graph)
    options = [(mode, need - cut) for mode, cut in (("int8", fp32 * 3 // 4), ("w4a8", fp32 * 7 // 8 + int8 // 2))
               if cut > 0]
    if not options:
        return ""
    fitting = [(mode, n) for mode, n in options if n <= room]
    if fitting:
        mode, n = fitting[0]
        return f"; the smallest configuration that fits: --quantize {mode}, about {n} B of constants"
    mode, n = options[-1]
    return f"; even --quantize {mode} would need about {n} B ({n - room} B too many)"


def check_constants_fit(board: Board, graph: Graph) -> None:
    """Reject a model whose constants alone overflow the region that holds them (flash, or the extra region
    for rodata), before a byte of C is generated: code and the runtime only add to this. The error names the
    narrowest weights that would fit."""
    region = board.region_for("rodata")
    constants = graph.constants()
    need = sum(t.nbytes for t in constants)
    if need > region.length:
        largest = max(constants, key=lambda t: t.nbytes)
        user = next((op for op in graph.ops if any(t is largest for t in op.inputs)), None)
        source = user.source.strip().removeprefix("at ").strip() if user is not None else ""
        # a model without a source line (a bare nn.Sequential) names only its submodule's path, "0: nn.Linear",
        # which after "at" reads like a line number
        where = "at" if ".py:" in source else "in submodule"
        layer = f", weights of the {user.kind} {where} {source}" if user is not None and source else ""
        raise McuError(
            f"model {graph.name} does not fit {board.name}: its constants need {need} B of {region.name} but the "
            f"board has {region.length} B ({need - region.length} B too many, before any code; the largest is "
            f"{largest.name}, {largest.nbytes} B{layer}){smallest_configuration(graph, need, region.length)}",
            hint="use a smaller model, quantize the weights narrower (--quantize int8: a quarter of fp32's weight "
                 "bytes; w4a8: an eighth), or pick a board with more flash")


def partition_ops(graph: Graph, board: Board, quantize: str, backends: list[str] | None,
                  options: BackendOptions, weights_in: str | None = None) -> PartitionReport:
    """Give each op to the first backend of the preference order that takes it (mcu/backends/base.py).
    ``weights_in``: where the constants go (--weights-in; None: the board's default), which tells the kernels
    whether their weights wait and through how large a cache (mcu/device/placement.py)."""
    placement = weights_in or board.weights_in
    ctx = Context(board, quantize, options, weights_wait(board, placement), weights_cache_bytes(board, placement))
    return partition(graph, resolve_backends(backends, ctx), ctx)


FUSE_POLICIES = ("off", "auto", "all")


def _fuse_to_fit(graph: Graph, board: Board) -> MemoryPlan:
    """Today's schedule does not fit the board: its main RAM is the budget the fused blocks must meet
    (mcu/plan/fusion.py); when they cannot, a streamed prefix (the input whole) and fused blocks after it,
    the fewest calls that fit (mcu/plan/prefix.py). The error names the smallest arena these reach."""
    budget = board.arena_regions()[0][1]
    try:
        choice = choose_fusion(graph, budget) if find_chains(graph) else None
    except McuError:
        choice = None
    if choice is None or choice.arena > budget:
        plan = choose_prefix(graph, False, lambda g: _arena_with_fusion(g, "auto", budget), budget)
        if plan.schedule is not None:  # the fewest calls that fit, or the smallest arena for the error below
            graph.ops = with_prefix(graph, plan.schedule, False).ops
    try:
        choice = _fusion_after_prefix(graph, budget)
    except McuError as exc:
        # a schedule with nothing to fuse or stream is every tensor whole: the arena alone says it
        why = exc.message if find_chains(graph) or plan.schedule is not None else \
            f"its arena needs {plan_memory(graph).arena_size} B (every tensor whole: no inverted-residual block to " \
            "run row by row, no prefix to stream in bands of rows)"
        floats = any(t.dtype == "float32" for t in graph.tensors() if not t.is_constant)
        raise McuError(f"model does not fit {board.name} ({budget} B of RAM for the arena after a "
                       f"{board.stack_bytes} B stack): {why}",
                       hint=f"use a smaller model or input, {'quantize to int8, ' if floats else ''}"
                            "or pick a board with more RAM") from None
    graph.ops = with_fused(graph, choice.chains, choice.bands).ops
    return plan_memory(graph, capacities=board.arena_regions())


def _arena_with_fusion(graph: Graph, fuse: str, budget: int | None) -> int:
    """The arena of ``graph`` once its blocks fuse as ``fuse`` asks (a budget none reaches: the smallest)."""
    if fuse == "off" and budget is None:
        return plan_memory(graph).arena_size
    if fuse == "all":
        chains = find_chains(graph)
        return plan_memory(with_fused(graph, chains)).arena_size
    try:
        return choose_fusion(graph, budget).arena
    except McuError:
        return choose_fusion(graph).arena


def _fusion_after_prefix(graph: Graph, budget: int | None) -> FusionChoice:
    """choose_fusion, its error naming a streamed prefix when one runs first."""
    try:
        return choose_fusion(graph, budget)
    except McuError as exc:
        prefix = next((op for op in graph.ops if op.kind == PREFIX_KIND), None)
        if prefix is None:
            raise
        smallest = choose_fusion(graph).arena
        p = prefix.attrs["prefix"]
        raise McuError(f"no schedule fits a RAM budget of {budget} B: the smallest arena is {smallest} B, with "
                       f"{PrefixSchedule(len(p.ops), tuple(p.bands), p.input_band).describe()}",
                       hint=f"raise --ram-budget to at least {smallest}"
                            + ("" if prefix.attrs["stream_input"] else ", or stream the input (--stream-input)")) \
            from exc


def _drop_speed_scratch(graph: Graph) -> bool:
    """Remove the scratch that kernels take for speed only (SPEED_SCRATCH); whether there was any."""
    ops = [op for op in graph.ops if op.attrs.pop(SPEED_SCRATCH, False)]
    for op in ops:
        op.attrs.pop("scratch_bytes", None)
    return bool(ops)


def compile_graph(graph: Graph, board: Board, quantize: str, backends: list[str] | None = None,
                  options: BackendOptions | None = None,
                  check_flash: bool = True,
                  fuse: str = "off", ram_budget: int | None = None,
                  fuse_costs: FusionCosts | None = None, fuse_band: int = 1,
                  stream_prefix: bool | int | PrefixSchedule = False, stream_input: bool = False,
                  speed_scratch: bool = True,
                  weights_in: str | None = None) -> tuple[MemoryPlan, GeneratedLibrary, PartitionReport]:
    """``backends``: preference order of backend ids (None: the registry's default for these options:
    CMSIS-NN first when it has its sources, then the optimized and the portable kernels;
    mcu/backends/registry.py). ``options``: each backend's own options by backend id (CMSIS-NN's
    sources, the optimized backend's weight layout), passed to the backends as they are.
    ``check_flash`` False: the constants need not fit the board's flash (a program file, whose weights
    the host runtime may load). ``fuse``: run inverted-residual blocks row by row (mcu/plan/fused.py), so
    their expanded tensors never exist whole: "auto" as few of them as give the smallest arena
    (mcu/plan/fusion.py), "all" every one, "off" none; ``ram_budget``: as few as bring the arena to at
    most these bytes (none when the default schedule fits), or with ``fuse_costs`` (each op's measured
    instructions) the fastest schedule within them; ``fuse_band``: output rows per pass of every block
    under "all". With neither, blocks fuse only when the
    default schedule does not fit the board: its RAM is then the budget. ``stream_prefix``: run the
    network's first ops band by band of rows through rings (mcu/plan/prefix.py), ending where the arena is
    smallest with the fewest calls (with ``ram_budget``: the fewest calls that fit), or as given (a number of ops run row by row,
    or a PrefixSchedule); ``stream_input``: the same, reading the input a band at a time through the
    firmware's callback, so that it is not in the arena. ``speed_scratch`` False: without the scratch
    that kernels take for speed only (SPEED_SCRATCH), as any build with a RAM budget, streamed rows or
    fused blocks is, and one that does not fit the board otherwise (the measured RAM-budget search
    compiles its schedules so). ``weights_in``: where the constants go ("flash", "fast"; None: the board's
    default), for the kernels whose layout depends on whether their weights wait (:func:`partition_ops`)."""
    if check_flash:  # before partitioning: packing the weights of a model that cannot fit costs minutes
        check_constants_fit(board, graph)
    # Before the plan: a backend's kernels bring their own scratch sizes and overlap contracts.
    report = partition_ops(graph, board, quantize, backends, dict(options or {}), weights_in)
    if not speed_scratch or ram_budget is not None or stream_prefix or stream_input or fuse != "off":
        _drop_speed_scratch(graph)
    if fuse not in FUSE_POLICIES:
        raise McuError(f"unknown block fusion {fuse!r}", hint=f"one of {', '.join(FUSE_POLICIES)}")
    if stream_prefix or stream_input:  # after partitioning: each row runs its op's backend's kernel
        with stage("stream"):
            plan = stream_prefix if not isinstance(stream_prefix, bool) else choose_prefix(
                graph, stream_input, lambda g: _arena_with_fusion(g, fuse, ram_budget), ram_budget).schedule
            if plan:
                graph.ops = with_prefix(graph, plan, stream_input).ops
    if fuse != "off" or ram_budget is not None:  # after partitioning: each fused stage runs its backend's kernel
        with stage("fuse"):
            if fuse == "all":
                chains = find_chains(graph)
                graph.ops = with_fused(graph, chains, {id(c[0]): fuse_band for c in chains}).ops
            elif ram_budget is not None and fuse_costs is not None:
                choice = choose_fastest(graph, ram_budget, fuse_costs)
                graph.ops = with_fused(graph, choice.chains, choice.bands).ops
            else:
                choice = _fusion_after_prefix(graph, ram_budget)
                graph.ops = with_fused(graph, choice.chains, choice.bands).ops
    with stage("plan"):
        memory = plan_memory(graph, capacities=board.arena_regions())
        if not fits(board, memory) and _drop_speed_scratch(graph):
            memory = plan_memory(graph, capacities=board.arena_regions())
        if (fuse == "off" and ram_budget is None and not stream_prefix and not stream_input
                and not fits(board, memory) and (find_chains(graph) or candidate_ends(graph))):
            memory = _fuse_to_fit(graph, board)
        check_fits(board, memory)
    with stage("generate"):
        return memory, render_library(graph, memory, quantize), report
