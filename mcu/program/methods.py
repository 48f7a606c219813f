"""Model files with several methods, and program files from compiled models.

A model file names extra entry points with a module-level ``methods`` dict::

    methods = {
        "forward": model,                                 # uses example_inputs / test_inputs / calibration
        "encode": {"fn": model.encode,                    # a bound method of an nn.Module (or a module)
                   "example_inputs": (torch.randn(1, 640),),
                   "test_inputs": [...], "calibration": [...]},   # optional; default: the module-level ones
    }

Each value is an ``nn.Module``, a bound method of one, or a dict with ``fn``
and optional ``example_inputs``, ``test_inputs`` and ``calibration``. Every
method is compiled on its own; the program writer stores constants that end up
with the same bytes (shared weights) once. Without ``methods`` the file has one
method, ``forward``, exactly as ``mcu build`` compiles it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch

from mcu.errors import McuError
from mcu.quantize.modes import MixedOptions, Palette
from mcu.capture.loader import ModelSpec, load_model_file, run_model_module, spec_from_objects
from mcu.program.writer import CompiledMethod
from mcu.api import compile_spec

if TYPE_CHECKING:
    from mcu.api import CompiledModel

DEFAULT_METHOD = "forward"


class _BoundMethod(torch.nn.Module):
    """An nn.Module whose forward is another method of a module (so torch.export can capture it)."""

    def __init__(self, owner: torch.nn.Module, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.method_name = name

    def forward(self, *args: torch.Tensor) -> Any:
        return getattr(self.owner, self.method_name)(*args)


def defines_methods(path: Path) -> bool:
    """Whether the file assigns a module-level ``methods`` (checked without running it)."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, SyntaxError):
        return False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "methods" for t in targets):
            return True
    return False


def _as_module(fn: Any, where: str, name: str) -> torch.nn.Module:
    if isinstance(fn, torch.nn.Module):
        return fn
    owner = getattr(fn, "__self__", None)
    if callable(fn) and isinstance(owner, torch.nn.Module):
        return _BoundMethod(owner, fn.__name__)
    raise McuError(f"{where}: methods['{name}'] must be an nn.Module or a bound method of one, "
                   f"got {type(fn).__name__}")


def _same_shapes(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def load_methods(path: str | Path) -> list[tuple[str, ModelSpec]]:
    """(method name, spec) for every method of a model file, ``forward`` first if present."""
    path = Path(path)
    if not defines_methods(path):
        return [(DEFAULT_METHOD, load_model_file(path))]
    return methods_of(run_model_file(path), path)


def run_model_file(path: Path) -> Any:
    """The model file run as a module (its own name, not left in sys.modules)."""
    return run_model_module(path, f"mcu_user_methods_{abs(hash(path.resolve()))}")


def methods_of(module: Any, path: Path) -> list[tuple[str, ModelSpec]]:
    """(method name, spec) of every entry of a model file's ``methods``, ``forward`` first."""
    where = str(path)
    methods = getattr(module, "methods")
    if not isinstance(methods, dict) or not methods or not all(isinstance(k, str) and k for k in methods):
        raise McuError(f"{where}: `methods` must be a non-empty dict from method names to modules")
    default_example = getattr(module, "example_inputs", None)
    default_tests = getattr(module, "test_inputs", None)
    default_calibration = getattr(module, "calibration", None)
    result = []
    for name, value in methods.items():
        entry: dict[str, Any] = value if isinstance(value, dict) else {"fn": value}
        if "fn" not in entry:
            raise McuError(f"{where}: methods['{name}'] is a dict without 'fn'")
        model = _as_module(entry["fn"], where, name)
        example = entry.get("example_inputs", default_example)
        if example is None:
            raise McuError(f"{where}: methods['{name}'] has no example_inputs and the file defines none")
        example_t = tuple(example) if isinstance(example, (tuple, list)) else (example,)
        tests = entry.get("test_inputs")
        calibration = entry.get("calibration")
        if tests is None and default_tests is not None and "example_inputs" not in entry:
            tests = default_tests
        if calibration is None and default_calibration is not None:
            first = next(iter(default_calibration), None)
            if first is not None and _same_shapes(first if isinstance(first, (tuple, list)) else (first,),
                                                  example_t):
                calibration = default_calibration
        result.append((name, spec_from_objects(model, example_t, calibration, tests, name=f"{path.stem}_{name}",
                                               where=f"{where} (method {name})", path=path)))
    result.sort(key=lambda item: item[0] != DEFAULT_METHOD)
    return result


def compile_methods(path: str | Path, board: str = "mps2-an505", quantize: str = "none",
                    compile_spec: Callable[..., CompiledModel] | None = None,
                    weight_palette: Palette | None = None, mixed: MixedOptions | None = None,
                    bias_correction: bool | None = None, weight_rounding: str | None = None) -> list[CompiledMethod]:
    """Compile every method of a model file for ``board``; ``weight_palette``: look-up-table weights of that
    many bits, ``mixed``: each layer's precision under an accuracy budget, ``bias_correction``: the biases
    corrected for rounded weights, ``weight_rounding`` nearest, gptq or searched (mcu.api.lower_spec), with the default
    compile only."""
    if compile_spec is not None and (weight_palette is not None or mixed is not None or bias_correction is not None
                                     or weight_rounding is not None):
        raise McuError("compile_methods: give weight_palette, mixed, bias_correction and weight_rounding to your own "
                       "compile_spec, not beside it")

    def compile_fn(spec: Any, board: str, quantize: str) -> CompiledModel:
        if compile_spec is not None:
            return compile_spec(spec, board, quantize)
        return _compile_for_program(spec, board, quantize, weight_palette, mixed, bias_correction, weight_rounding)

    return [CompiledMethod(name, compile_fn(spec, board, quantize)) for name, spec in load_methods(path)]


def _compile_for_program(spec: Any, board: str, quantize: str, weight_palette: Palette | None = None,
                         mixed: MixedOptions | None = None, bias_correction: bool | None = None,
                         weight_rounding: str | None = None) -> CompiledModel:
    # A program's weights go where its loader puts them, not necessarily in this board's flash.
    return compile_spec(spec, board, quantize, check_flash=False, weight_palette=weight_palette, mixed=mixed,
                        bias_correction=bias_correction, weight_rounding=weight_rounding)
