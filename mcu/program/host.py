"""The host runtime: program files run in-process by the C interpreter.

    prog = Program.load("model.mpk")            # or bytes; weights="model.mpw" if external
    prog.method_names                           # ["forward", ...]
    (y,) = prog.method("forward")(x)            # numpy in, float numpy out (raw=True: int8 codes)

The interpreter is the same C (runtime_c/interp) that runs in the firmware,
built into the ``mcu._native`` extension. Arrays passed to a method are in
PyTorch's logical shape and the tensor's dtype (int8 codes for int8 I/O; a
float array for an int8 input is quantized with the input's scale and
zero-point); outputs come back in logical shape as the model's real values (int8
outputs dequantized to float32, the convention of ``CompiledModel.run``), or with
``raw=True`` in the device's dtype.
:meth:`Method.run_raw` takes and returns flat arrays in memory order instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mcu import _native
from mcu.errors import McuError
from mcu.program import format as fmt
from mcu.reference.encoding import decode, encode

DTYPE_NAMES = {code: name for name, code in fmt.DTYPE_CODES.items()}
NUMPY = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "uint8": np.uint8,
         "int64": np.int64}
MCU_OK = 0
MCU_ERR_UNSUPPORTED = 4
MCU_ERR_WEIGHTS_MISMATCH = 12
MCU_ERR_WEIGHTS_CORRUPT = 18
MCU_ERR_ARENA_LIMIT = 19
# The host's arena limit at load: far above any microcontroller, below what a malformed size could ask.
HOST_ARENA_LIMIT = 1 << 30


class ProgramError(McuError):
    """The interpreter refused a program or a call; ``status`` is its mcu_status code."""

    def __init__(self, status: int, what: str, hint: str | None = None) -> None:
        self.status = status
        self.status_name = _native.status_str(status)
        super().__init__(f"{what}: {self.status_name} (mcu_status {status})", hint=hint)


class WeightsCorruptError(ProgramError):
    """The external weights file's bytes differ from its own CRC-32, or a segment's from the CRC-32 its
    program records (corruption, or a weights file edited with its own header made consistent). A CRC
    detects accidents, it is no signature."""


class CustomKernelsMissing(ProgramError):
    """A program with custom ops loaded without their kernels: the interpreter would refuse it as unsupported."""

    def __init__(self, message: str, hint: str) -> None:
        self.status = MCU_ERR_UNSUPPORTED
        self.status_name = _native.status_str(MCU_ERR_UNSUPPORTED)
        McuError.__init__(self, message, hint=hint)


def _program_error(status: int, what: str, hint: str | None = None) -> ProgramError:
    cls = WeightsCorruptError if status == MCU_ERR_WEIGHTS_CORRUPT else ProgramError
    return cls(status, what, hint)


def _check(result: tuple[int, Any], what: str, hint: str | None = None) -> Any:
    status, value = result
    if status != MCU_OK:
        raise ProgramError(status, what, hint)
    return value


@dataclass(frozen=True)
class TensorSpec:
    """A method input or output as the program declares it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    dim_order: tuple[int, ...]
    nbytes: int
    arena: int
    offset: int
    scale: float | None
    zero_point: int

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def physical_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[d] for d in self.dim_order)

    def to_memory_order(self, x: Any) -> np.ndarray:
        return encode(x, self.name, self.shape, self.dim_order, self.dtype, self.scale, self.zero_point)

    def from_memory_order(self, flat: np.ndarray, real: bool = False) -> np.ndarray:
        """Device values (flat, memory order) -> logical shape; ``real``: the model's real values (int8 with a
        scale dequantized)."""
        return decode(flat, self.shape, self.dim_order, self.dtype, self.scale, self.zero_point, real=real)


@dataclass
class Method:
    program: Program
    index: int
    name: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    arena_sizes: list[int]
    n_instructions: int
    n_bundled: int

    def run_raw(self, *inputs: Any, arena_sizes: Sequence[int] | None = None,
                keep_state: bool = False) -> list[np.ndarray]:
        """Flat memory-order inputs in the tensors' dtypes -> flat outputs likewise. ``keep_state``: run in
        the program's kept arenas, shared by its methods and kept between calls (model state, a KV cache,
        as on a device); :meth:`Program.reset_state` clears them. Otherwise each run has fresh arenas."""
        if len(inputs) != len(self.inputs):
            raise McuError(f"method {self.name} takes {len(self.inputs)} inputs, got {len(inputs)}")
        bufs = []
        for spec, x in zip(self.inputs, inputs):
            arr = np.ascontiguousarray(np.asarray(x), dtype=NUMPY[spec.dtype]).reshape(-1)
            if arr.size != spec.numel:
                raise McuError(f"input {spec.name} of {self.name} has {spec.numel} elements, got {arr.size}")
            bufs.append(arr)
        if keep_state:
            raw = _check(self.program.handle.run(self.index, bufs, None, True), f"running method {self.name}")
        else:
            raw = _check(self.program.handle.run(self.index, bufs, None if arena_sizes is None else list(arena_sizes)),
                         f"running method {self.name}")
        return [np.frombuffer(b, dtype=NUMPY[s.dtype]).copy() for b, s in zip(raw, self.outputs)]

    def __call__(self, *inputs: Any, raw: bool = False) -> list[np.ndarray]:
        """Inputs in logical shape -> outputs in logical shape: the model's real values (int8 outputs
        dequantized to float32, as ``CompiledModel.run`` returns them), or with ``raw=True`` the
        device's values and dtypes (int8 codes)."""
        if len(inputs) != len(self.inputs):
            raise McuError(f"method {self.name} takes {len(self.inputs)} inputs, got {len(inputs)}")
        flat = [spec.to_memory_order(_numpy(x)) for spec, x in zip(self.inputs, inputs)]
        return [spec.from_memory_order(y, real=not raw) for spec, y in zip(self.outputs, self.run_raw(*flat))]

    def bundled(self, vector: int) -> tuple[list[np.ndarray], list[np.ndarray], list[float | None]]:
        """Bundled test vector ``vector``: flat inputs, flat expected outputs, tolerances (None: exact)."""
        h = self.program.handle
        ins = [np.frombuffer(_check(h.bundled(self.index, vector, 0, i), "bundled input")[0], NUMPY[s.dtype])
               for i, s in enumerate(self.inputs)]
        outs, tols = [], []
        for i, s in enumerate(self.outputs):
            data, tol = _check(h.bundled(self.index, vector, 1, i), "bundled output")
            outs.append(np.frombuffer(data, NUMPY[s.dtype]))
            tols.append(None if tol < 0 else tol)
        return ins, outs, tols


@dataclass
class Program:
    """A verified program file, ready to run (see the module docstring)."""

    handle: Any = field(repr=False)
    source: str
    methods: list[Method] = field(default_factory=list, repr=False)
    custom: Any = field(default=None, repr=False)  # keeps the custom kernels' library loaded while in use

    @classmethod
    def load(cls, program: str | Path | bytes, weights: str | Path | bytes | None = None,
             verify_checksum: bool = True, arena_limit: int = HOST_ARENA_LIMIT, custom: Any = None) -> Program:
        """Load and verify a program (a path or its bytes); ``weights``: its external weights file.
        ``custom``: where the program's custom kernels (``mcu.custom_op`` registrations) come from: the model
        file it was exported from (a path), that file's ``custom_ops`` list, or their host build
        (mcu.device.custom_host.HostKernels); needed only by a program with custom ops.

        Without ``weights``, a program that needs them looks for ``<program>.mpw`` next to its path.
        ``arena_limit``: the most arena bytes one method may ask for (a device passes its RAM).
        Raises :class:`ProgramError` (or a subclass) for any file the C loader refuses.
        """
        source = "<bytes>"
        path: Path | None = None
        if isinstance(program, (str, Path)):
            path = Path(program)
            source = str(path)
            program = _read_file(path, "program file")
        weights_blob = _read_file(Path(weights), "weights file") if isinstance(weights, (str, Path)) else weights
        # the weights file a weights fault is reported against (None: no weights were passed)
        weights_source = None if weights is None else str(weights) if isinstance(weights, (str, Path)) else "<bytes>"
        flags = 0 if verify_checksum else 1
        extra: tuple[int, ...] = ()
        # lazy: the custom kernels' host build only for programs that have them
        from mcu.device.custom_host import host_kernels_for, program_custom_functions

        needed = program_custom_functions(bytes(program))
        if needed and custom is None:
            example = f"Program.load({str(path) if path else '...'!r}, custom='model.py')"
            raise CustomKernelsMissing(f"program {source} calls custom kernels ({', '.join(needed)}): pass custom= the "
                                       "model file that registers them",
                                       hint=f"e.g. {example}, or custom=<its custom_ops list>")
        if needed:
            custom = host_kernels_for(custom, needed, source)
            extra = tuple(custom.addresses)
        status, handle = _native.program_load(bytes(program), weights_blob, flags, arena_limit, extra)
        if status == MCU_ERR_WEIGHTS_MISMATCH and weights_blob is None and path is not None:
            sibling = path.with_suffix(fmt.WEIGHTS_SUFFIX)
            if sibling.is_file():
                status, handle = _native.program_load(bytes(program), sibling.read_bytes(), flags, arena_limit,
                                                      extra)
                weights_source = str(sibling)
        if status != MCU_OK:
            hint = None
            if status == MCU_ERR_WEIGHTS_MISMATCH:
                hint = ("pass the weights file written with the program (mcu export --external-weights); a weights "
                        "file from another export has another content id")
            elif status == MCU_ERR_WEIGHTS_CORRUPT:
                hint = "the weights file was changed after export: export the program and its weights again"
            elif status == MCU_ERR_ARENA_LIMIT:
                hint = f"a method needs more arena than the {arena_limit} B limit: pass a larger arena_limit"
            what = f"cannot load program {source}"
            if status in (MCU_ERR_WEIGHTS_MISMATCH, MCU_ERR_WEIGHTS_CORRUPT) and weights_source is not None:
                what += f" with weights file {weights_source}"  # the fault is in that file, not the program
            raise _program_error(status, what, hint)
        prog = cls(handle=handle, source=source, custom=custom)
        for i in range(handle.method_count()):
            info = _check(handle.method_info(i), "method info")
            ins = [_spec(_check(handle.io_info(i, 0, k), "input info")) for k in range(info["n_inputs"])]
            outs = [_spec(_check(handle.io_info(i, 1, k), "output info")) for k in range(info["n_outputs"])]
            prog.methods.append(Method(prog, i, info["name"], ins, outs, list(info["arena_sizes"]),
                                       info["n_instructions"], info["n_bundled"]))
        return prog

    @property
    def method_names(self) -> list[str]:
        return [m.name for m in self.methods]

    def method(self, name: str) -> Method:
        for m in self.methods:
            if m.name == name:
                return m
        raise McuError(f"program {self.source} has no method '{name}'",
                       hint=f"its methods: {', '.join(self.method_names)}")

    def reset_state(self) -> None:
        """Clear the arenas that runs with ``keep_state=True`` share (start a new sequence)."""
        self.handle.reset_state()

    @property
    def arena_sizes(self) -> dict[str, list[int]]:
        """Bytes of each arena every method needs (the caller-supplied memory on a device)."""
        return {m.name: list(m.arena_sizes) for m in self.methods}


def _read_file(path: Path, what: str) -> bytes:
    if path.is_dir():
        raise McuError(f"{what} {path} is a folder", hint=f"pass the {what} itself, e.g. {path / 'model.mpk'}"
                       if what == "program file" else f"pass the {what} itself")
    if not path.is_file():
        raise McuError(f"{what} {path} does not exist")
    return path.read_bytes()


def verify_program_files(program: Path, weights: Path | None = None, custom: Any = None) -> str:
    """Load a program (and its weights) from disk through the C loader, which checks the header, both
    CRC-32s, the weights segments' CRCs and every kernel parameter, then run every bundled vector;
    a one-line summary, or :class:`ProgramError` / :class:`McuError`. ``custom``: as for :meth:`Program.load`."""
    prog = Program.load(program, weights, custom=custom)
    vectors = mismatches = 0
    for m in prog.methods:
        for v in range(m.n_bundled):
            ins, expected, tols = m.bundled(v)
            outs = m.run_raw(*ins)
            vectors += 1
            for y, e, tol in zip(outs, expected, tols):
                diff = np.abs(y.astype(np.float64) - e.astype(np.float64))
                mismatches += int(diff.size > 0 and float(diff.max()) > (tol or 0.0))
    if mismatches:
        raise McuError(f"{program}: {mismatches} bundled outputs of {vectors} vectors differ from the expected "
                       f"values", hint="the program does not reproduce its own test vectors: export it again")
    ran = f"{vectors} bundled vector(s) match" if vectors else \
        "no bundled vectors to run (--bundle-tests bundles them)"
    return f"verified {program}{' and ' + str(weights) if weights else ''}: {len(prog.methods)} method(s), {ran}"


def _spec(d: dict[str, Any]) -> TensorSpec:
    return TensorSpec(name=d["name"], dtype=DTYPE_NAMES[d["dtype"]], shape=tuple(d["shape"]),
                      dim_order=tuple(d["dim_order"]), nbytes=d["nbytes"], arena=d["arena"], offset=d["offset"],
                      scale=d["scale"], zero_point=d["zero_point"])


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)
