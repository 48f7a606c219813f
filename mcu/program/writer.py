"""Write program files (runtime_c/schema/program.fbs) from compiled methods.

Each method is a lowered graph with its memory plan; its instructions are the
same kernel calls, with the same parameters, as the generated C (both come
from :func:`mcu.emit.kernels.program_call`). Constants become segments in the
data region after the flatbuffer, 16-byte aligned, stored once however many
tensors and methods use the same bytes; with ``external_weights`` they go to a
separate weights file whose content id the program records.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Sequence

import flatbuffers
import numpy as np

from mcu.version import __version__
from mcu.emit.kernels import SCRATCH, program_call
from mcu.errors import McuError
from mcu.ir import NUMPY_DTYPES, Graph, Op, Tensor
from mcu.plan.fused import KIND as FUSED_KIND
from mcu.plan.memory import MemoryPlan, scratch_bytes
from mcu.plan.prefix import KIND as PREFIX_KIND, streamed_inputs
from mcu.program import format as fmt
from mcu.program.fused import LOOP, STEP_NAMES, Call, band_calls, band_loop
from mcu.program.prefix import rows_program
from mcu.program.format import Field
from mcu.capture.custom_ops import call_info, delegate_id

if TYPE_CHECKING:
    from mcu.api import CompiledModel



class UnsupportedKernel(McuError):
    """An op whose kernel has no program kernel id (or no structured operands) yet."""


@dataclass
class BundledVector:
    """One test vector for the firmware harness: arrays in memory order and the device's dtypes."""

    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    tolerances: list[float] | None = None  # per output; None: bit-exact


@dataclass
class MethodSource:
    name: str
    graph: Graph
    memory: MemoryPlan
    bundled: list[BundledVector] = field(default_factory=list)


@dataclass
class DelegatePayload:
    """A backend's compiled partition. In a method, an op of kind ``delegate`` (made by
    mcu.backends.base.partition: attrs ``backend`` id and ``payload`` bytes) becomes one entry of the
    program's delegates (its payload in an inline segment) and one DELEGATE instruction whose operands
    are the op's inputs then its outputs; at load the interpreter turns each entry into a handle of
    the backend registered under that id (runtime_c/include/mcu/delegate.h)."""

    backend_id: str
    payload: bytes


@dataclass
class Segment:
    name: str
    location: int
    data: bytes
    offset: int = 0  # into its file's data region, set by layout


@dataclass
class ProgramImage:
    """A program file's bytes, plus its weights file when the weights are external."""

    program: bytes
    weights: bytes | None
    weights_name: str | None
    methods: list[str]
    segments: list[Segment]
    # method -> (op name, kernel function) of each instruction in execution order: what a traced
    # interpreter's event ids (instruction indices) mean.
    instructions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    # method -> the indices of the instructions a traced interpreter reports, in order: every one but a
    # loop's body (the loop is one event).
    traced: dict[str, list[int]] = field(default_factory=dict)

    @property
    def constant_bytes(self) -> int:
        """Bytes of unique constant data (each segment once, without padding)."""
        return sum(len(s.data) for s in self.segments if s.name.startswith("const:"))


def _word(value: int | float) -> int:
    if isinstance(value, float):
        return int(np.array([value], dtype=np.float32).view(np.int32)[0])
    v = int(value)
    if not -(2**31) <= v < 2**31:
        raise McuError(f"kernel parameter {v} does not fit int32")
    return v


class _Segments:
    def __init__(self, external: bool) -> None:
        self.items: list[Segment] = []
        self._index: dict[tuple[int, bytes], int] = {}
        self.external = external

    def add(self, name: str, data: bytes, location: int) -> int:
        key = (location, data)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(Segment(name, location, data))
        return self._index[key]

    def constant(self, t: Tensor) -> int:
        assert t.data is not None
        data = np.ascontiguousarray(np.asarray(t.data).astype(NUMPY_DTYPES[t.dtype])).tobytes()
        location = fmt.SEGMENT_EXTERNAL if self.external else fmt.SEGMENT_INLINE
        return self.add(f"const:{t.name}", data, location)

    def layout(self, location: int) -> bytes:
        """Place every segment of one location, 16-byte aligned; the data region's bytes."""
        out = bytearray()
        for s in self.items:
            if s.location == location:
                out += bytes(fmt.align(len(out)) - len(out))
                s.offset = len(out)
                out += s.data
        return bytes(out)


class _Builder:
    """Thin helpers over flatbuffers.Builder (children must be built before their parent)."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1 << 16)

    def string(self, s: str) -> int:
        return self.b.CreateString(s)

    def ints(self, values: list[int], dtype: type = np.int32) -> int:
        return self.b.CreateNumpyVector(np.asarray(values, dtype=dtype))

    def offsets(self, items: list[int]) -> int:
        self.b.StartVector(4, len(items), 4)
        for off in reversed(items):
            self.b.PrependUOffsetTRelative(off)
        return self.b.EndVector()

    def table(self, fields: dict[str, int], scalars: dict[str, tuple[str, int | float]], ids: dict[str, int]) -> int:
        """A table from offset fields (already built) and scalar fields (kind, value)."""
        b = self.b
        b.StartObject(max(ids.values()) + 1)
        for name, (kind, value) in scalars.items():
            slot = ids[name]
            if kind == "u8":
                b.PrependUint8Slot(slot, int(value), 0)
            elif kind == "u16":
                b.PrependUint16Slot(slot, int(value), 0)
            elif kind == "u32":
                b.PrependUint32Slot(slot, int(value), 0)
            elif kind == "i32":
                b.PrependInt32Slot(slot, int(value), -1 if name == "axis" else 0)
            else:
                raise ValueError(kind)
        for name, off in fields.items():
            b.PrependUOffsetTRelativeSlot(ids[name], off, 0)
        return b.EndObject()


STREAMED = (-1, -1)  # the place of a streamed input: in no arena


def _tensor(fb: _Builder, t: Tensor, place: tuple[int, int] | None, segments: _Segments) -> int:
    fields = {"name": fb.string(t.name), "shape": fb.ints(list(t.shape)),
              "dim_order": fb.ints(list(t.dim_order), np.uint8)}
    if t.quant is not None and not t.is_constant:
        # Activations only: a constant's quantization is already folded into the kernel parameters
        # (per-channel multipliers and shifts), and per-channel scales would cost 8 B per channel.
        q = fb.table({"scale": fb.ints(list(t.quant.scale), np.float32),
                      "zero_point": fb.ints(list(t.quant.zero_point))},
                     {"axis": ("i32", -1 if t.quant.axis is None else t.quant.axis)}, Field.QUANT)
        fields["quant"] = q
    if t.is_constant:
        placement, index, offset = fmt.PLACEMENT_CONSTANT, segments.constant(t), 0
    elif place == STREAMED:
        placement, index, offset = fmt.PLACEMENT_STREAMED, 0, 0
    else:
        assert place is not None
        placement, (index, offset) = fmt.PLACEMENT_ARENA, place
    scalars = {"dtype": ("u8", fmt.DTYPE_CODES[t.dtype]), "placement": ("u8", placement),
               "index": ("u32", index), "offset": ("u32", offset), "nbytes": ("u32", t.nbytes)}
    return fb.table(fields, scalars, Field.TENSOR)


def _concat_in_parts(op: Op, inputs: list[int], chunk_bytes: list[int], at: tuple[int, int],
                     tid: Callable[..., int]) -> list[tuple[int, list[int], list[int], str]]:
    """A concat of more inputs than an instruction holds, as several concats: with one outer row (a stack
    of time steps, say) each input fills one contiguous range of the output, so each instruction takes as
    many inputs as fit and writes its own range, an arena view of the output's bytes at their offset."""
    arena, offset = at
    per = fmt.MAX_OPERANDS - 1
    out = []
    for k in range(0, len(inputs), per):
        group, sizes = inputs[k:k + per], chunk_bytes[k:k + per]
        dtype = op.output.dtype
        part = Tensor(f"{op.output.name}_part{k // per}", (sum(sizes) // NUMPY_DTYPES[dtype]().itemsize,), dtype)
        out.append((fmt.KERNEL_IDS["mcu_concat"], [*group, tid(part, (arena, offset))], [1, *sizes], op.name))
        offset += sum(sizes)
    return out


def _method(fb: _Builder, src: MethodSource, segments: _Segments,
            delegates: list[DelegatePayload]) -> tuple[int, list[tuple[str, str, bool]]]:
    graph, memory = src.graph, src.memory
    ids: dict[int, int] = {}
    order: list[tuple[Tensor, tuple[int, int] | None]] = []  # (tensor, (arena, offset); None: a constant)

    def place(t: Tensor) -> tuple[int, int]:
        return memory.arena_index(t), memory.offset(t)

    def tid(t: Tensor | None, at: tuple[int, int] | None = None) -> int:
        if t is None:
            return -1
        if id(t) not in ids:
            ids[id(t)] = len(order)
            order.append((t, None if t.is_constant else at or place(t)))
        return ids[id(t)]

    def scratch_tid(op: Op, scratch: tuple[int, int, int]) -> int:
        """The op's scratch buffer: an int8 arena tensor of its planned size and place."""
        arena, offset, size = scratch
        return tid(Tensor(f"{op.name}_scratch", (size,), "int8"), (arena, offset))

    # (kernel, operands, params, op name, strides, iterations): the last two only in a loop's body
    insns: list[tuple[int, list[int], list[int], str, list[int] | None, list[int] | None]] = []
    placed: dict[tuple[int, int, int], int] = {}
    held: list[Tensor] = []
    scratches: dict[tuple[int, int, int], Tensor] = {}  # a stage's scratch by (bytes, arena, offset)

    def placed_tid(t: Tensor, at: tuple[int, int]) -> int:
        """A row tensor of a fused block where one of its loop's instructions first reads or writes it (the
        same tensor object may sit at several places, one tensor of the method each)."""
        key = (id(t), *at)
        if key not in placed:
            placed[key] = len(order)
            order.append((replace(t, quant=None), at))
            held.append(t)  # alive while the method is written, so that its id names no other tensor
        return placed[key]

    def body_operands(op: Op, c: Call, what: str) -> tuple[int, list[int]]:
        """The kernel id and operand ids of a call of a fused block's or a prefix's body (``what``)."""
        if isinstance(c.function, int):
            kernel = c.function
        elif c.function in fmt.KERNEL_IDS:
            kernel = fmt.KERNEL_IDS[c.function]
        else:
            raise UnsupportedKernel(f"kernel {c.function} ({op.name}) has no program kernel id yet")
        operands = []
        for o, where in zip(c.operands, c.places):
            if o is None or (o is SCRATCH and where is None):
                operands.append(-1)
            elif o is SCRATCH:
                key = (c.scratch_bytes, *where)
                if key not in scratches:
                    scratches[key] = Tensor(f"{op.name}_scratch", (c.scratch_bytes,), "int8")
                operands.append(placed_tid(scratches[key], where))
            elif where is None:
                operands.append(tid(o))  # type: ignore[arg-type]
            else:
                operands.append(placed_tid(o, where))  # type: ignore[arg-type]
        if len(operands) > fmt.MAX_OPERANDS or len(c.params) > fmt.MAX_PARAMS:
            raise UnsupportedKernel(f"a row call of {what} takes {len(operands)} operands and "
                                    f"{len(c.params)} parameters; an instruction holds at most "
                                    f"{fmt.MAX_OPERANDS} and {fmt.MAX_PARAMS}",
                                    hint="run the generated C (mcu build / mcu export)")
        return kernel, operands

    def fused(op: Op) -> None:
        """A fused block: one LOOP over its bands, then the loop's body (mcu/program/fused.py)."""
        at = memory.scratch_offsets.get(id(op))
        if at is None:
            raise McuError(f"fused block {op.name} has no planned scratch (its ring)")
        passes = band_calls(op, place, (memory.scratch_arena_index(op), at, scratch_bytes(op)))
        steps = band_loop(passes)
        insns.append((LOOP, [], [len(passes), len(steps)], op.name, None, None))
        for step in steps:
            c = step.call
            kernel, operands = body_operands(op, c, f"fused block {op.name}")
            whole = (step.first, step.end) == (0, len(passes))
            insns.append((kernel, operands, [_word(v) for v in c.params], op.name,
                          step.strides if any(step.strides) else None, None if whole else [step.first, step.end]))

    def prefix(op: Op) -> None:
        """A streamed prefix: one ROWS instruction over its table, then its row calls (mcu/program/prefix.py)."""
        at = memory.scratch_offsets.get(id(op))
        if at is None:
            raise McuError(f"streamed prefix {op.name} has no planned scratch (its rings)")
        rows = rows_program(op, place, (memory.scratch_arena_index(op), at, scratch_bytes(op)))
        operands = [tid(rows.table), -1 if rows.rings is None else placed_tid(*rows.rings),
                    -1 if rows.stream is None else tid(rows.stream)]
        insns.append((fmt.KERNEL_ROWS, operands, rows.params, op.name, None, None))
        for c in rows.body:
            kernel, body = body_operands(op, c, f"streamed prefix {op.name}")
            insns.append((kernel, body, [_word(v) for v in c.params], op.name, None, None))

    streamed = streamed_inputs(graph)
    for t in graph.inputs:
        tid(t, STREAMED if id(t) in streamed else None)
    for op in graph.ops:
        if op.kind == "delegate":
            if "backend" not in op.attrs or "payload" not in op.attrs:
                raise McuError(f"delegate op {op.name} has no backend id and payload",
                               hint="delegate ops come from mcu.backends.base.partition")
            delegates.append(DelegatePayload(str(op.attrs["backend"]), bytes(op.attrs["payload"])))
            operands = [tid(t) for t in (*op.inputs, *op.outputs)]
            insns.append((fmt.KERNEL_DELEGATE, operands, [len(delegates) - 1, len(op.outputs)], op.name, None, None))
            continue
        if op.kind == FUSED_KIND:
            fused(op)
            continue
        if op.kind == PREFIX_KIND:
            prefix(op)
            continue
        planned = memory.scratch_offsets.get(id(op))
        scratch = None if planned is None else (memory.scratch_arena_index(op), planned, scratch_bytes(op))
        if op.kind == "custom":  # a user kernel: through the delegate registry, its params as the payload
            info = call_info(op)
            function = op.attrs["custom"].kernel(op.output.dtype).function
            delegates.append(DelegatePayload(delegate_id(function), info.payload()))
            extra = [] if scratch is None else [scratch_tid(op, scratch)]
            operands = [tid(t) for t in op.inputs] + extra + [tid(op.output)]
            insns.append((fmt.KERNEL_DELEGATE, operands, [len(delegates) - 1, 1], op.name, None, None))
            continue
        call = program_call(op, place, scratch)
        if call is None:
            continue
        if call.function not in fmt.KERNEL_IDS or not call.operands:
            raise UnsupportedKernel(f"kernel {call.function} ({op.name}) has no program kernel id yet",
                                    hint="add its row to the interpreter's kernel table (runtime_c/interp/mcu_kernels.def) "
                                         "and its id to mcu_program_kernel (program.h)")
        operands = []
        for o in call.operands:
            if o is not SCRATCH:
                operands.append(tid(o))  # type: ignore[arg-type]
            elif call.scratch is None:
                operands.append(-1)  # the kernel takes a context but the plan gave it no scratch
            else:
                operands.append(scratch_tid(op, call.scratch))
        if call.function == "mcu_concat" and len(operands) > fmt.MAX_OPERANDS and int(call.params[0]) == 1:
            insns += [(*part, None, None) for part in
                      _concat_in_parts(op, operands[:-1], [int(v) for v in call.params[1:]], place(op.output), tid)]
            continue
        if len(operands) > fmt.MAX_OPERANDS or len(call.params) > fmt.MAX_PARAMS:
            raise UnsupportedKernel(f"{op.kind} {op.name} takes {len(operands)} operands and {len(call.params)} "
                                    f"parameters; a program instruction holds at most {fmt.MAX_OPERANDS} and "
                                    f"{fmt.MAX_PARAMS}", hint="run the generated C (mcu build / mcu export)")
        insns.append((fmt.KERNEL_IDS[call.function], operands, [_word(v) for v in call.params], op.name, None, None))
    outputs = [tid(t) for t in graph.outputs]
    inputs = [ids[id(t)] for t in graph.inputs]

    kernel_names = {**{v: k for k, v in fmt.KERNEL_IDS.items()}, **STEP_NAMES}
    tensors = [_tensor(fb, t, offset, segments) for t, offset in order]
    insn_offsets = []
    body: dict[tuple[str, tuple[int, ...]], int] = {}  # a loop body's vectors, each stored once
    names: dict[str, int] = {}

    def vector(kind: str, values: list[int], shared: bool) -> int:
        if not shared:
            return fb.ints(values, np.uint32 if kind == "iterations" else np.int32)
        key = (kind, tuple(values))
        if key not in body:
            body[key] = fb.ints(values, np.uint32 if kind == "iterations" else np.int32)
        return body[key]

    left = 0  # instructions of the current loop's body still to come
    bodies: list[bool] = []  # per instruction: in a loop's body
    for kernel, operands, params, name, strides, iterations in insns:
        shared = left > 0
        bodies.append(shared)
        left = params[1] if kernel == LOOP else params[3] if kernel == fmt.KERNEL_ROWS else max(left - 1, 0)
        if shared and name not in names:
            names[name] = fb.string(name)
        fields = {"operands": vector("operands", operands, shared), "params": vector("params", params, shared),
                  "name": names[name] if shared else fb.string(name)}
        if strides is not None:
            fields["strides"] = vector("strides", strides, True)
        if iterations is not None:
            fields["iterations"] = vector("iterations", iterations, True)
        insn_offsets.append(fb.table(fields, {"kernel": ("u16", kernel)}, Field.INSTRUCTION))
    bundled = []
    for v, vec in enumerate(src.bundled):
        ins = [segments.add(f"vec:{src.name}/{v}/in{i}", _array_bytes(x, graph.inputs[i]), fmt.SEGMENT_INLINE)
               for i, x in enumerate(vec.inputs)]
        exp = [segments.add(f"vec:{src.name}/{v}/out{i}", _array_bytes(y, graph.outputs[i]), fmt.SEGMENT_INLINE)
               for i, y in enumerate(vec.expected)]
        fields = {"inputs": fb.ints(ins, np.uint32), "expected": fb.ints(exp, np.uint32)}
        if vec.tolerances is not None:
            fields["tolerances"] = fb.ints(list(vec.tolerances), np.float32)
        bundled.append(fb.table(fields, {}, Field.BUNDLED))
    fields = {
        "name": fb.string(src.name),
        "tensors": fb.offsets(tensors),
        "inputs": fb.ints(inputs, np.uint32),
        "outputs": fb.ints(outputs, np.uint32),
        "instructions": fb.offsets(insn_offsets),
        "arena_sizes": fb.ints([a.plan.arena_size for a in memory.arenas], np.uint32),
    }
    if bundled:
        fields["bundled"] = fb.offsets(bundled)
    return fb.table(fields, {}, Field.METHOD), [(name, kernel_names.get(kernel, "delegate"), in_body)
                                                 for (kernel, _o, _p, name, *_), in_body in zip(insns, bodies)]


def _array_bytes(x: np.ndarray, t: Tensor) -> bytes:
    arr = np.ascontiguousarray(x, dtype=NUMPY_DTYPES[t.dtype]).reshape(-1)
    if arr.size != t.numel:
        raise McuError(f"bundled vector for {t.name} has {arr.size} elements, the tensor has {t.numel}")
    return arr.tobytes()


def write_program(methods: list[MethodSource], external_weights: bool = False,
                  weights_name: str = "weights.mpw") -> ProgramImage:
    """The program file (and weights file) for ``methods``, which may share constants."""
    names = [m.name for m in methods]
    if not methods or len(set(names)) != len(names) or not all(names):
        raise McuError(f"a program needs one or more uniquely named methods, got {names}")
    fb = _Builder()
    segments = _Segments(external_weights)
    delegates: list[DelegatePayload] = []
    built = [_method(fb, m, segments, delegates) for m in methods]
    method_offsets = [offset for offset, _ in built]
    delegate_tables = []
    for d in delegates:
        seg = segments.add(f"delegate:{d.backend_id}", d.payload, fmt.SEGMENT_INLINE)
        delegate_tables.append(fb.table({"backend_id": fb.string(d.backend_id)}, {"segment": ("u32", seg)},
                                        Field.DELEGATE))
    inline = segments.layout(fmt.SEGMENT_INLINE)
    external = segments.layout(fmt.SEGMENT_EXTERNAL) if external_weights else None
    segment_tables = [fb.table({"name": fb.string(s.name)},
                               {"location": ("u8", s.location), "offset": ("u32", s.offset),
                                "size": ("u32", len(s.data)), "crc": ("u32", zlib.crc32(s.data))}, Field.SEGMENT)
                      for s in segments.items]
    fields = {
        "producer": fb.string(f"mcu {__version__}"),
        "methods": fb.offsets(method_offsets),
        "segments": fb.offsets(segment_tables),
    }
    if delegate_tables:
        fields["delegates"] = fb.offsets(delegate_tables)
    weights_blob = None
    flags = 0
    if external is not None:
        cid = fmt.content_id(external)
        fields["external_weights"] = fb.table(
            {"file_name": fb.string(weights_name), "content_id": fb.ints(list(cid), np.uint8)},
            {"size": ("u32", len(external))}, Field.EXTERNAL)
        weights_blob = fmt.assemble(fmt.WEIGHTS_MAGIC, b"", external, cid)
        flags = fmt.FLAG_EXTERNAL_WEIGHTS
    root = fb.table(fields, {"format_version": ("u32", fmt.FORMAT_VERSION)}, Field.PROGRAM)
    fb.b.Finish(root, file_identifier=fmt.PROGRAM_MAGIC)
    program = fmt.assemble(fmt.PROGRAM_MAGIC, bytes(fb.b.Output()), inline, flags=flags)
    return ProgramImage(program=program, weights=weights_blob, weights_name=weights_name if external else None,
                        methods=names, segments=list(segments.items),
                        instructions={m.name: [(name, kernel) for name, kernel, _ in insns]
                                      for m, (_, insns) in zip(methods, built)},
                        traced={m.name: [i for i, (_, _, body) in enumerate(insns) if not body]
                                for m, (_, insns) in zip(methods, built)})


@dataclass
class CompiledMethod:
    name: str
    model: CompiledModel


def bundled_vectors(cm: CompiledModel) -> list[BundledVector]:
    """The model's test inputs and what the device must output, as the firmware harness checks them."""
    tolerances = cm.tolerances()
    return [BundledVector(cm.encode_inputs(x), list(y), tolerances)
            for x, y in zip(cm.spec.test_inputs, cm.expected_outputs)]


def method_source(name: str, cm: CompiledModel, bundle: bool = False) -> MethodSource:
    return MethodSource(name, cm.graph, cm.memory, bundled_vectors(cm) if bundle else [])


def program_from(methods: Sequence[CompiledMethod], external_weights: bool = False, bundle: bool = False,
                 weights_name: str = "weights.mpw") -> ProgramImage:
    """One program file holding every method (constants with equal bytes stored once)."""
    return write_program([method_source(m.name, m.model, bundle) for m in methods],
                         external_weights=external_weights, weights_name=weights_name)
