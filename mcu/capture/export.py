"""Stage 1: capture the user's module as a graph with ``torch.export``."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from mcu.errors import McuError
from mcu.capture.sourceinfo import user_frame
from torch.export.graph_signature import OutputKind, TensorArgument


def capture(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...], where: str = "",
            example_line: int | None = None) -> torch.export.ExportedProgram:
    """``where``: the model file (or name) for messages; ``example_line``: where it defines example_inputs."""
    if not isinstance(model, torch.fx.GraphModule):  # a converted pt2e module refuses .eval()
        model = model.eval()
    try:
        return torch.export.export(model, example_inputs, strict=False)
    except Exception as exc:  # torch.export's own messages are long; keep the first line
        raise capture_error(exc, model, example_inputs, where, example_line) from None


def capture_error(exc: BaseException, model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...],
                  where: str = "", example_line: int | None = None) -> McuError:
    """One line for a model torch.export could not trace: the user's line where there is one, else the layer
    it failed in and the example inputs' shapes and file:line (a layer of torch.nn failing on its input is
    most often example_inputs shaped for another model)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    prefix = f"{where}: " if where else ""
    at = user_frame(exc.__traceback__)
    if at:
        return McuError(f"torch.export could not capture the model{at}: {first}",
                        hint="the model must be traceable by torch.export with static shapes")
    layer = _failing_layer(exc, model)
    shapes = ", ".join(str(list(t.shape)) for t in example_inputs)
    defined = f" ({Path(where).name}:{example_line})" if where and example_line else ""
    return McuError(f"{prefix}torch.export could not capture the model{layer}: {first}; example_inputs{defined} "
                    f"has shapes {shapes}",
                    hint="shape example_inputs as the model's first layer expects, or fix the layer")


def _failing_layer(exc: BaseException, model: torch.nn.Module) -> str:
    """`` in layer 'features.0' (Linear)``: the innermost submodule of ``model`` whose forward was running."""
    names = {id(m): name for name, m in model.named_modules()}
    found = ""
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_locals.get("self")
        if tb.tb_frame.f_code.co_name == "forward" and isinstance(module, torch.nn.Module) and id(module) in names:
            name = names[id(module)]
            found = f" in layer '{name}' ({type(module).__name__})" if name else f" in {type(module).__name__}"
        tb = tb.tb_next
    return found


def check_user_outputs(ep: torch.export.ExportedProgram, where: str) -> None:
    """Every output the model returns is a computed tensor (a dict or nested tuple of them is flattened in
    torch.export's order); a string, number or None cannot come out of the device."""
    user = [spec for spec in ep.graph_signature.output_specs if spec.kind == OutputKind.USER_OUTPUT]
    for index, spec in enumerate(user):
        if not isinstance(spec.arg, TensorArgument):
            value = getattr(spec.arg, "value", None)
            raise McuError(f"{where}: forward returns {type(value).__name__} {value!r} as its output {index} "
                           "(outputs flattened in order), not a tensor",
                           hint="return tensors (alone, in tuples, lists or dicts of str keys); compute other "
                                "values outside the model")


@contextmanager
def torch_pytree_deprecation_hidden() -> Iterator[None]:
    """torch 2.13's ``torch.export`` trips its own pytree deprecation (``isinstance(treespec, LeafSpec)``): not the
    user's concern, and under ``-W error`` (a test suite's ``filterwarnings = error``) it failed the capture."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*treespec, LeafSpec.*", category=FutureWarning)
        yield
