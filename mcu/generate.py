"""Text generation on the device: a model file with ``prefill`` and ``decode`` methods that
share model state (a KV cache), a prompt, a token count and a character tokenizer.

The model file defines, besides ``methods = {"prefill": ..., "decode": ...}``:

- ``prompt`` (a string), ``generate_tokens`` (an int), ``chars`` (token i is ``chars[i]``);
- optionally ``top_k`` and ``seed`` (default: greedy) and ``quantize`` (the mode ``--quantize auto``
  picks, e.g. ``"int4-weight"``).

``prefill(tokens[1, C], pos[C]) -> logits[1, vocab]`` runs a chunk of C prompt tokens at positions
``pos``; ``decode(token[1, 1], pos[1]) -> logits[1, vocab]`` one token. The prompt runs as whole chunks
of C through prefill and its last ``len % C`` tokens through decode, so any prompt length works with one
compiled chunk length. C trades RAM for speed: prefill's working memory grows with C (every row of the
chunk is live at once), and with C = 1 the arena is the state plus decode's working set. C comes from
``prefill_chunk`` in the model file (default: the length of prefill's example input) or
``--prefill-chunk``. Both methods are compiled on their own and rendered into one C library
(mcu/emit/c_methods.py) whose firmware runs the generation loop. Three runs of the loop must agree token
for token: the Python reference (the quantized model in PyTorch, a fresh copy with cleared state), the
generated C built for the host, and the firmware on the board.
"""

from __future__ import annotations

import ast
import copy
import ctypes
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from mcu.device.boards import Board, load_board
from mcu.emit.c_methods import MethodInput, render_methods_library
from mcu.emit.c_model import GeneratedLibrary, environment
from mcu.errors import McuError
from mcu.capture.loader import ModelSpec
from mcu.quantize import modes
from mcu.program.methods import methods_of, run_model_file
from mcu.program.writer import CompiledMethod, program_from
from mcu.api import LoweredModel, compile_spec, lower_spec
from mcu.device.hostbuild import build_host_library
from mcu.emit.outputs import build_lock, cached_build_dir, stage_sources
from mcu.device.toolchain import build_firmware
from mcu.device.sim.qemu import run_qemu
from mcu.program.device import build_interpreter_firmware, firmware_view, run_program
from mcu.quantize.torchao_int4 import int4_weight_model

METHODS = ("prefill", "decode")
_REQUIRED = ("methods", "prompt", "generate_tokens", "chars")


def _module_names(path: Path) -> set[str]:
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def is_generation_file(path: str | Path) -> bool:
    """Whether a model file asks for text generation (checked without running it)."""
    return set(_REQUIRED) <= _module_names(Path(path))


@dataclass
class Sampler:
    """Greedy (``top_k`` 0) or top-k sampling with a fixed-seed xorshift32; the firmware's sampler
    (codegen/generate_main.c.j2) does the same arithmetic in float32."""

    top_k: int = 0
    seed: int = 1
    _state: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._state = self.seed & 0xFFFFFFFF

    def _next(self) -> int:
        x = self._state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self._state = x
        return x

    def __call__(self, logits: np.ndarray) -> int:
        logits = np.asarray(logits, dtype=np.float32).reshape(-1)
        if not self.top_k:
            return int(np.argmax(logits))
        order = sorted(range(logits.size), key=lambda i: (-float(logits[i]), i))[:self.top_k]
        weights = [np.exp(np.float32(logits[i] - logits[order[0]]), dtype=np.float32) for i in order]
        total = np.float32(0)
        for w in weights:
            total = np.float32(total + w)
        draw = np.float32(np.float32(self._next() >> 8) * np.float32(1.0 / 16777216.0)) * total
        acc = np.float32(0)
        for i, w in zip(order, weights):
            acc = np.float32(acc + w)
            if draw < acc:
                return i
        return order[-1]


@dataclass
class GenerationFile:
    path: Path
    methods: dict[str, ModelSpec]
    owner: torch.nn.Module  # the module whose methods prefill and decode are
    prompt: list[int]
    count: int
    chars: str
    top_k: int
    seed: int
    quantize: str | None  # the file's own choice for --quantize auto
    chunk: int  # prompt tokens per prefill call

    @property
    def name(self) -> str:
        return self.path.stem

    def sampler(self) -> Sampler:
        return Sampler(self.top_k, self.seed)

    def text(self, tokens: list[int]) -> str:
        return "".join(self.chars[t] for t in tokens)

    @property
    def prompt_calls(self) -> int:
        """prefill calls plus the decode calls of the prompt's remainder."""
        return len(self.prompt) // self.chunk + len(self.prompt) % self.chunk

    def with_chunk(self, chunk: int) -> GenerationFile:
        """The same file with prefill compiled for ``chunk`` tokens per call."""
        if chunk < 1:
            raise McuError(f"{self.path}: the prefill chunk must be at least 1 token, not {chunk}")
        spec = self.methods["prefill"]
        tokens = torch.tensor([[self.prompt[i % len(self.prompt)] for i in range(chunk)]],
                              dtype=spec.example_inputs[0].dtype)
        x = (tokens, torch.arange(chunk, dtype=spec.example_inputs[1].dtype))
        prefill = dataclasses.replace(spec, example_inputs=x, test_inputs=[x],
                                      calibration=[x] if spec.calibration else None)
        return dataclasses.replace(self, methods={**self.methods, "prefill": prefill}, chunk=chunk)


def load_generation(path: str | Path) -> GenerationFile:
    path = Path(path)
    module = run_model_file(path)
    specs = dict(methods_of(module, path))
    missing = [m for m in METHODS if m not in specs]
    if missing:
        raise McuError(f"{path}: a generation model needs methods {', '.join(METHODS)}; "
                       f"`methods` lacks {', '.join(missing)}")
    entries = getattr(module, "methods")
    owners = {getattr(entries[m].get("fn") if isinstance(entries[m], dict) else entries[m], "__self__", None)
              for m in METHODS}
    owner = next(iter(owners))
    if len(owners) != 1 or not isinstance(owner, torch.nn.Module):
        raise McuError(f"{path}: prefill and decode must be methods of one nn.Module (they share its state)")
    chars = getattr(module, "chars")
    prompt_text = getattr(module, "prompt")
    if not isinstance(chars, str) or not isinstance(prompt_text, str):
        raise McuError(f"{path}: `chars` and `prompt` must be strings")
    unknown = sorted({c for c in prompt_text if c not in chars})
    if unknown:
        raise McuError(f"{path}: the prompt has characters outside `chars`: {''.join(unknown)!r}")
    count = int(getattr(module, "generate_tokens"))
    if count < 1:
        raise McuError(f"{path}: generate_tokens must be at least 1")
    if not prompt_text:
        raise McuError(f"{path}: the prompt is empty", hint="generation starts from at least one character")
    example = specs["prefill"].example_inputs
    if len(example) != 2 or example[0].dim() != 2 or example[1].dim() != 1:
        raise McuError(f"{path}: prefill takes (tokens[1, C], pos[C]); its example inputs have shapes "
                       f"{[tuple(t.shape) for t in example]}",
                       hint="prefill(tokens, pos) runs C prompt tokens at positions pos (consecutive)")
    quantize = getattr(module, "quantize", None)
    gf = GenerationFile(path=path, methods=specs, owner=owner, prompt=[chars.index(c) for c in prompt_text],
                        count=count, chars=chars, top_k=int(getattr(module, "top_k", 0)),
                        seed=int(getattr(module, "seed", 1)), quantize=quantize, chunk=int(example[0].shape[1]))
    chunk = getattr(module, "prefill_chunk", None)
    return gf.with_chunk(int(chunk)) if chunk is not None else gf


def _loop(prefill: Callable[[list[int], int], np.ndarray], decode: Callable[[int, int], np.ndarray],
          gf: GenerationFile, count: int, sampler: Sampler) -> list[int]:
    """The generation loop every implementation runs: the prompt in chunks through prefill (the remainder
    through decode), then sample and decode."""
    prompt, chunk = gf.prompt, gf.chunk
    whole = len(prompt) - len(prompt) % chunk
    logits = np.zeros(0, np.float32)
    for start in range(0, whole, chunk):
        logits = prefill(prompt[start:start + chunk], start)
    for pos in range(whole, len(prompt)):
        logits = decode(prompt[pos], pos)
    tokens: list[int] = []
    for i in range(count):
        tokens.append(sampler(logits))
        if i + 1 < count:
            logits = decode(tokens[-1], len(prompt) + i)
    return tokens


def reference_model(gf: GenerationFile, quantize: str) -> torch.nn.Module:
    """A fresh copy of the model (cleared state) quantized as the device runs it."""
    if modes.int4_weights(quantize):
        if modes.is_dynamic(quantize):
            raise McuError("the Python reference of int4-dynamic generation is not available",
                           hint="use --quantize int4-weight or none")
        return int4_weight_model(gf.owner)  # a deep copy
    if not modes.is_float(quantize):
        raise McuError(f"text generation supports --quantize none and int4-weight, not {quantize}")
    return copy.deepcopy(gf.owner)


def reference_tokens(gf: GenerationFile, quantize: str) -> list[int]:
    model = reference_model(gf, quantize)

    def prefill(chunk: list[int], start: int) -> np.ndarray:
        return model.prefill(torch.tensor([chunk]), torch.arange(start, start + len(chunk))).numpy()

    def decode(token: int, pos: int) -> np.ndarray:
        return model.decode(torch.tensor([[token]]), torch.tensor([pos])).numpy()

    with torch.no_grad():
        return _loop(prefill, decode, gf, gf.count, gf.sampler())


@dataclass
class CompiledGeneration:
    file: GenerationFile
    board: Board
    quantize: str
    methods: dict[str, Any]  # name -> mcu.api.CompiledModel
    library: GeneratedLibrary

    @property
    def prefix(self) -> str:
        return self.library.prefix

    @property
    def vocab(self) -> int:
        return len(self.file.chars)

    @property
    def state_bytes(self) -> int:
        return sum(t.nbytes for t in self.methods["decode"].graph.state.values())

    def arena_bytes(self) -> int:
        return max(cm.memory.arena_size for cm in self.methods.values())


def _check_signatures(gf: GenerationFile, methods: dict[str, Any]) -> None:
    vocab = len(gf.chars)
    expected = {"prefill": [(1, gf.chunk), (gf.chunk,)], "decode": [(1, 1), (1,)]}
    for name, cm in methods.items():
        ins = [(tuple(t.shape), t.dtype) for t in cm.graph.inputs]
        outs = [(tuple(t.shape), t.dtype) for t in cm.graph.outputs]
        if ins != [(s, "int32") for s in expected[name]] or outs != [((1, vocab), "float32")]:
            raise McuError(f"{gf.path}: method {name} takes {ins} and returns {outs}; generation needs "
                           f"{[(s, 'int64') for s in expected[name]]} -> [((1, {vocab}), 'float32')]",
                           hint="prefill(tokens[1, C], pos[C]) and decode(token[1, 1], pos[1]) return logits[1, vocab]")


def _generation_quantize(gf: GenerationFile, quantize: str) -> str:
    return (gf.quantize or modes.NONE) if quantize == modes.AUTO else quantize


def lower_generation(gf: GenerationFile, quantize: str = modes.AUTO) -> dict[str, LoweredModel]:
    """Each method captured, quantized and lowered once, for :func:`compile_generation` on several boards."""
    quantize = _generation_quantize(gf, quantize)
    return {name: lower_spec(gf.methods[name], quantize) for name in METHODS}


def compile_generation(gf: GenerationFile, board: str | Board = "mps2-an505",
                       quantize: str = modes.AUTO, chunk: int | None = None,
                       lowered: dict[str, LoweredModel] | None = None) -> CompiledGeneration:
    """``lowered``: methods already lowered (:func:`lower_generation`, by method name) of this very file and
    quantize mode; the others are lowered here."""
    if chunk is not None and chunk != gf.chunk:
        gf = gf.with_chunk(chunk)
    board = load_board(board) if isinstance(board, str) else board
    quantize = _generation_quantize(gf, quantize)
    methods = {}
    for name in METHODS:
        done = (lowered or {}).get(name)
        if done is None:
            methods[name] = compile_spec(gf.methods[name], board, quantize)
            continue
        if done.spec is not gf.methods[name] or done.quantize != quantize:
            raise McuError(f"{gf.path}: method {name} was lowered from another model or at {done.quantize}, "
                           f"not at {quantize}")
        methods[name] = done.compile(board)
    _check_signatures(gf, methods)
    lib = render_methods_library(gf.name, [MethodInput(n, cm.graph, cm.memory) for n, cm in methods.items()],
                                 quantize, tokens=[ord(c) for c in gf.chars])
    return CompiledGeneration(gf, board, quantize, methods, lib)


# --- the host build ---------------------------------------------------------------------------------------


def host_tokens(cg: CompiledGeneration) -> list[int]:
    """The generation loop over the generated C built for the host (ctypes)."""
    dll = ctypes.CDLL(str(build_host_library(cg.library)))
    p = cg.prefix
    reset, prefill_fn, decode_fn = (getattr(dll, f"{p}_reset_state"), getattr(dll, f"{p}_prefill_run"),
                                    getattr(dll, f"{p}_decode_run"))
    prefill_fn.restype = decode_fn.restype = ctypes.c_int
    logits = np.zeros(cg.vocab, dtype=np.float32)
    out = logits.ctypes.data_as(ctypes.c_void_p)

    def check(status: int, what: str) -> np.ndarray:
        if status != 0:
            # lazy: the C extension loads only when a program runs on the host
            from mcu._native import status_str

            raise McuError(f"the host build's {what} returned status {status} ({status_str(status)})")
        return logits.copy()

    def prefill(chunk: list[int], start: int) -> np.ndarray:
        tokens = np.asarray(chunk, dtype=np.int32)
        pos = np.arange(start, start + len(chunk), dtype=np.int32)
        return check(prefill_fn(tokens.ctypes.data_as(ctypes.c_void_p), pos.ctypes.data_as(ctypes.c_void_p), out),
                     "prefill")

    def decode(token: int, pos: int) -> np.ndarray:
        t = np.asarray([token], dtype=np.int32)
        q = np.asarray([pos], dtype=np.int32)
        return check(decode_fn(t.ctypes.data_as(ctypes.c_void_p), q.ctypes.data_as(ctypes.c_void_p), out), "decode")

    reset()
    return _loop(prefill, decode, cg.file, cg.file.count, cg.file.sampler())


# --- the firmware -----------------------------------------------------------------------------------------


@dataclass
class GenerationFirmware:
    build: Any  # mcu.device.toolchain.Firmware
    expected: list[int]


def _loop_view(cg: CompiledGeneration, expected: list[int]) -> dict[str, Any]:
    """What codegen/generate_loop.j2 renders: the prompt, its chunking, the sampling, the expected tokens."""
    return {"prompt": cg.file.prompt, "chunk": cg.file.chunk, "count": cg.file.count, "expected": expected,
            "top_k": cg.file.top_k, "seed": cg.file.seed & 0xFFFFFFFF or 1}


def firmware_sources(cg: CompiledGeneration, expected: list[int]) -> dict[str, str]:
    main = environment().get_template("generate_main.c.j2").render(lib=cg.library.view, g=_loop_view(cg, expected))
    return {**cg.library.files, "main.c": main}


def build_generation_firmware(cg: CompiledGeneration, expected: list[int], out_dir: Path | None = None) -> Any:
    files = firmware_sources(cg, expected)
    cached = out_dir is None
    out = Path(out_dir) if out_dir is not None else cached_build_dir(cg.board.name, f"{cg.prefix}-gen", files,
                                                                        cg.library.defines)
    with build_lock(out, wait=cached):
        sources, includes = stage_sources(out, files, cg.library)
        fw = build_firmware(cg.board, sources, includes, out, name=f"{cg.prefix}_gen", stack_usage=True,
                            defines=dict(cg.library.defines))
    if fw.flash_bytes > cg.board.flash.length:
        raise McuError(f"the generation firmware does not fit {cg.board.name}: it needs {fw.flash_bytes} B of flash, "
                       f"the board has {cg.board.flash.length} B ({fw.flash_bytes - cg.board.flash.length} B too many)",
                       hint="quantize the weights: --quantize int4-weight")
    return fw


@dataclass
class GenerationRun:
    tokens: list[int]
    text: str
    passed: bool
    prompt_instructions: list[int]  # per call: the prefill chunks, then the remainder's decode calls
    decode_instructions: list[int]  # per generated token after the first
    console: str

    @property
    def prefill_instructions(self) -> int:
        """The whole prompt."""
        return sum(self.prompt_instructions)

    @property
    def per_decode_token(self) -> float:
        return float(np.mean(self.decode_instructions)) if self.decode_instructions else 0.0


def run_generation_firmware(cg: CompiledGeneration, fw: Any) -> GenerationRun:
    if cg.board.sim_kind != "qemu":
        raise McuError(f"board '{cg.board.name}' has no simulator here",
                       hint="run generation on a QEMU board, e.g. --board mps2-an505")
    result = run_qemu(cg.board, fw.elf, timeout_s=900)
    return _parse_run(cg, result.console, result.instructions, result.exit_code)


def _parse_run(cg: CompiledGeneration, console: str, instructions: list[int], exit_code: int) -> GenerationRun:
    """A generation firmware's console (TOKEN, TEXT, RESULT lines) and its per-call instruction counts."""
    tokens: list[int] = []
    text = ""
    passed = False
    for line in console.splitlines():
        parts = line.split(" ")
        if parts[0] == "TOKEN" and len(parts) == 3:
            tokens.append(int(parts[2]))
        elif line.startswith("TEXT "):
            text = line[5:]
        elif line.startswith("RESULT "):
            passed = parts[1] == "PASS"
    calls = cg.file.prompt_calls
    if len(instructions) < calls:
        raise McuError(f"the simulator measured {len(instructions)} calls; the prompt alone makes {calls}",
                       hint=console[-2000:])
    return GenerationRun(tokens=tokens, text=text, passed=passed and exit_code == 0,
                         prompt_instructions=instructions[:calls], decode_instructions=instructions[calls:],
                         console=console)


# --- the program file -------------------------------------------------------------------------------------


def program_image(cg: CompiledGeneration) -> Any:
    """One program file with both methods (equal weights stored once; mcu/program/methods.py)."""
    return program_from([CompiledMethod(name, cm) for name, cm in cg.methods.items()])


def program_tokens(cg: CompiledGeneration, image: Any = None) -> list[int]:
    """The generation loop through the program file on the host interpreter: both methods run in the
    same kept arenas, so the KV cache prefill writes is the one decode reads."""
    # lazy: the C extension loads only when a program runs on the host
    from mcu.program.host import Program

    program = Program.load((image or program_image(cg)).program)
    prefill, decode = program.method("prefill"), program.method("decode")
    program.reset_state()

    def run_prefill(chunk: list[int], start: int) -> np.ndarray:
        return prefill.run_raw(np.asarray(chunk, np.int32), np.arange(start, start + len(chunk), dtype=np.int32),
                               keep_state=True)[0]

    def run_decode(token: int, pos: int) -> np.ndarray:
        return decode.run_raw(np.asarray([token], np.int32), np.asarray([pos], np.int32), keep_state=True)[0]

    return _loop(run_prefill, run_decode, cg.file, cg.file.count, cg.file.sampler())


def build_program_generation_firmware(cg: CompiledGeneration, expected: list[int], image: Any = None) -> Any:
    """The interpreter firmware with the generation loop (codegen/program_generate_main.c.j2): the model
    comes from the program file loaded into its flash region at run time; only the kernels it uses."""
    image = image or program_image(cg)
    g = _loop_view(cg, expected)
    main = environment().get_template("program_generate_main.c.j2").render(
        f=firmware_view(cg.board), g=g, tokens=[ord(c) for c in cg.file.chars], state_bytes=cg.state_bytes)
    kernels = {fn for steps in image.instructions.values() for _, fn in steps}
    return build_interpreter_firmware(cg.board, kernels, main=main)


def run_program_generation(cg: CompiledGeneration, expected: list[int], image: Any = None,
                           fw: Any = None) -> GenerationRun:
    """The generation loop on the simulated board through the interpreter firmware and the program file."""
    if cg.board.sim_kind != "qemu":
        raise McuError(f"board '{cg.board.name}' has no simulator here",
                       hint="run generation on a QEMU board, e.g. --board mps2-an505")
    image = image or program_image(cg)
    fw = fw or build_program_generation_firmware(cg, expected, image)
    run = run_program(cg.board, fw.elf, image.program, timeout_s=900)
    return _parse_run(cg, run.console, run.instructions, run.exit_code)
