"""Load a user's ``model.py`` (see DESIGN.md, "model.py contract").

Module-level names: ``model`` (an ``nn.Module``) or ``get_model()``;
``example_inputs`` (a tuple of tensors); optional ``calibration`` (an iterable
of input tuples) and ``test_inputs`` (a list of input tuples for the bundled
test vectors). Anything missing or mistyped is a one-line :class:`McuError`.
"""

from __future__ import annotations

import builtins
import difflib
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mcu.errors import McuError
import ast
from mcu.capture.custom_ops import check_registrations
from mcu.capture.eval_copy import eval_copy


EXTRAS = ("eval_data", "eval_metric", "qat_train")


@dataclass
class ModelSpec:
    model: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    calibration: list[tuple[torch.Tensor, ...]] | None
    test_inputs: list[tuple[torch.Tensor, ...]]
    name: str
    path: Path | None = None
    # Optional names of the model file read by other commands (`mcu eval`: eval_data, eval_metric;
    # `--qat`: qat_train).
    extras: dict[str, Any] = field(default_factory=dict)
    custom_ops: tuple[Any, ...] = ()  # the model's registered custom ops (mcu.capture.custom_ops.CustomOp)
    # Where the model file assigns its module-level names (example_inputs -> line), for messages.
    lines: dict[str, int] = field(default_factory=dict)


def _as_input_tuple(value: Any, what: str, where: str) -> tuple[torch.Tensor, ...]:
    if isinstance(value, torch.Tensor):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not value or not all(isinstance(v, torch.Tensor) for v in value):
        raise McuError(f"{where}: {what} must be a tuple of tensors, got {type(value).__name__}")
    return tuple(value)


def _input_list(value: Any, what: str, where: str) -> list[tuple[torch.Tensor, ...]]:
    if isinstance(value, torch.Tensor):
        raise McuError(f"{where}: {what} must be a list of input tuples, got a single tensor",
                       hint=f"wrap it: {what} = [(x,)]")
    try:
        items = list(value)
    except TypeError:
        raise McuError(f"{where}: {what} must be an iterable of input tuples, got {type(value).__name__}") from None
    if not items:
        raise McuError(f"{where}: {what} is empty")
    return [_as_input_tuple(v, f"each item of {what}", where) for v in items]


def check_input_shapes(inputs: list[tuple[torch.Tensor, ...]], example: tuple[torch.Tensor, ...],
                       what: str, where: str, lines: dict[str, int] | None = None) -> None:
    """Every tuple must match example_inputs in count, shape and dtype (``lines``: where the model file
    assigns each name, for the message)."""
    at = _lines_note(where, lines or {}, what, "example_inputs")
    for i, tup in enumerate(inputs):
        if len(tup) != len(example):
            raise McuError(f"{where}: {what}[{i}] has {len(tup)} inputs, example_inputs has {len(example)}{at}")
        for j, (t, e) in enumerate(zip(tup, example)):
            if tuple(t.shape) != tuple(e.shape) or t.dtype != e.dtype:
                raise McuError(
                    f"{where}: {what}[{i}] input {j} has shape {list(t.shape)} {t.dtype}, "
                    f"but example_inputs has {list(e.shape)} {e.dtype}{at}",
                    hint=f"make every {what} item shaped like example_inputs",
                )


def _lines_note(where: str, lines: dict[str, int], *names: str) -> str:
    """`` (calibration at model.py:7, example_inputs at model.py:5)`` for the names the file assigns."""
    known = [f"{n} at {Path(where).name}:{lines[n]}" for n in names if n in lines]
    return f" ({', '.join(known)})" if known else ""


def flatten_outputs(out: Any, where: str = "model", path: str = "") -> list[tuple[str, torch.Tensor]]:
    """A model's return value as (name, tensor) pairs in the order torch.export flattens it: tuples and lists
    element by element, dicts in insertion order; a name is its path (``logits``, ``1.0``; ``output`` for a
    lone tensor). Anything but tensors is refused: the device returns tensors only."""
    if isinstance(out, torch.Tensor):
        return [(path or "output", out)]
    if isinstance(out, (tuple, list)):
        items = [(f"{path}.{i}" if path else str(i), v) for i, v in enumerate(out)]
    elif isinstance(out, dict):
        if not all(isinstance(k, str) for k in out):
            raise McuError(f"{where}: forward returns a dict with non-string keys "
                           f"({', '.join(repr(k) for k in out if not isinstance(k, str))})",
                           hint="name each output with a string key")
        items = [(f"{path}.{k}" if path else k, v) for k, v in out.items()]
    else:
        raise McuError(f"{where}: forward returns {type(out).__name__} at output '{path or 'output'}', not a tensor",
                       hint="return tensors (alone, in tuples, lists or dicts of str keys); compute other values "
                            "outside the model")
    flat = [pair for name, v in items for pair in flatten_outputs(v, where, name)]
    if not flat:
        raise McuError(f"{where}: forward returns no tensor at '{path or 'output'}'")
    return flat


def check_finite(inputs: list[tuple[torch.Tensor, ...]], what: str, where: str,
                 lines: dict[str, int] | None = None) -> None:
    """Floating-point inputs hold no NaN or inf: a quantizer cannot range them and a test cannot compare them."""
    for i, tup in enumerate(inputs):
        for j, t in enumerate(tup):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
                at = _lines_note(where, lines or {}, what)
                raise McuError(f"{where}: {what}[{i}] input {j} holds {n_nan} NaN and {n_inf} inf values{at}",
                               hint=f"give {what} finite values (e.g. torch.nan_to_num)")


def spec_from_objects(model: torch.nn.Module, example_inputs: Any, calibration: Any = None,
                      test_inputs: Any = None, name: str = "model", where: str = "mcu.compile",
                      path: Path | None = None, custom_ops: Any = None,
                      lines: dict[str, int] | None = None) -> ModelSpec:
    if not isinstance(model, torch.nn.Module):
        raise McuError(f"{where}: model must be a torch.nn.Module, got {type(model).__name__}")
    example = _as_input_tuple(example_inputs, "example_inputs", where)
    calib = _input_list(calibration, "calibration", where) if calibration is not None else None
    tests = _input_list(test_inputs, "test_inputs", where) if test_inputs is not None else [example]
    check_finite([example], "example_inputs", where, lines)
    if calib is not None:
        check_input_shapes(calib, example, "calibration", where, lines)
        check_finite(calib, "calibration", where, lines)
    check_input_shapes(tests, example, "test_inputs", where, lines)
    check_finite(tests, "test_inputs", where, lines)
    return ModelSpec(model=eval_copy(model, where), example_inputs=example, calibration=calib, test_inputs=tests, name=name,
                     path=path, custom_ops=check_registrations(custom_ops, where), lines=dict(lines or {}))


def run_model_module(path: Path, module_name: str) -> Any:
    """The model file run as a module named ``module_name`` (not left in ``sys.modules``), able to import the
    helpers beside it as a script run from its folder could; what its code raises is one :class:`McuError`
    with the file's line and, for a misspelt name, the name it is closest to."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise McuError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code failed: show where, briefly
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path.resolve()
                  or Path(f.filename) == path]
        at = f" at line {frames[-1].lineno}" if frames else ""
        raise McuError(f"{path}{at}: running the model file raised {type(exc).__name__}: {exc}",
                       hint=_closest_name(exc, module)) from None
    finally:
        sys.modules.pop(module_name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def _closest_name(exc: Exception, module: Any) -> str | None:
    """``did you mean 'X'?`` for a misspelt attribute or name (Python 3.11 prints it only in tracebacks)."""
    name = getattr(exc, "name", None)
    if isinstance(exc, AttributeError) and name and getattr(exc, "obj", None) is not None:
        try:
            candidates = dir(exc.obj)
        except Exception:  # the user's object's __dir__ failing is no reason to lose the error itself
            return None
    elif isinstance(exc, NameError) and name:
        candidates = [*vars(module), *dir(builtins)]
    else:
        return None
    close = difflib.get_close_matches(name, candidates, n=1)
    return f"did you mean '{close[0]}'?" if close else None


def load_model_file(path: str | Path) -> ModelSpec:
    path = Path(path)
    if path.is_dir():
        raise McuError(f"model file {path} is a folder", hint="pass the model's .py file, e.g. model.py")
    if not path.is_file():
        raise McuError(f"model file {path} does not exist")
    module = run_model_module(path, f"mcu_user_model_{abs(hash(path.resolve()))}")
    where = str(path)
    lines = _assignment_lines(path)
    if hasattr(module, "model"):
        model = module.model
    elif hasattr(module, "get_model"):
        model = module.get_model()
    else:
        raise McuError(f"{path}: defines neither `model` nor `get_model()`",
                       hint="add `model = MyNet()` (an nn.Module) at module level")
    if not isinstance(model, torch.nn.Module):
        raise McuError(f"{path}: `model` must be a torch.nn.Module, got {type(model).__name__}")
    if not hasattr(module, "example_inputs"):
        near = _misspelt(module, "example_inputs")
        raise McuError(f"{path}: defines no `example_inputs`" + (f" (it defines `{near}`)" if near else ""),
                       hint=f"rename `{near}` to `example_inputs`" if near else
                       "add `example_inputs = (torch.randn(1, 3, 32, 32),)`")
    for optional in ("calibration", "test_inputs"):
        # a misspelt optional name is not an absent one: without calibration `--quantize auto` builds fp32
        near = None if hasattr(module, optional) else _misspelt(module, optional)
        if near:
            raise McuError(f"{path}: defines `{near}` but no `{optional}`, the name mcu reads",
                           hint=f"rename `{near}` to `{optional}`")
    spec = spec_from_objects(
        model,
        module.example_inputs,
        getattr(module, "calibration", None),
        getattr(module, "test_inputs", None),
        name=path.stem,
        where=where,
        path=path,
        custom_ops=getattr(module, "custom_ops", None),
        lines=lines,
    )
    spec.extras = {k: getattr(module, k) for k in EXTRAS if hasattr(module, k)}
    return spec


def _misspelt(module: Any, name: str) -> str | None:
    """A module-level list or tuple whose name is one slip from ``name`` (``calibraton``, ``test_input``)."""
    data = [k for k, v in vars(module).items() if not k.startswith("_") and isinstance(v, (list, tuple))]
    close = difflib.get_close_matches(name, data, n=1, cutoff=0.85)
    return close[0] if close else None


def _assignment_lines(path: Path) -> dict[str, int]:
    """The line of each module-level assignment (the last one wins, as at run time)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, OSError, ValueError):
        return {}
    lines: dict[str, int] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    lines[name.id] = node.lineno
    return lines
