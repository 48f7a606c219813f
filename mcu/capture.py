"""Stage 1: capture the user's module as a graph with ``torch.export``."""

from __future__ import annotations

import torch

from mcu.errors import McuError
from mcu.sourceinfo import user_frame


def capture(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> torch.export.ExportedProgram:
    if not isinstance(model, torch.fx.GraphModule):  # a converted pt2e module refuses .eval()
        model = model.eval()
    try:
        return torch.export.export(model, example_inputs, strict=False)
    except Exception as exc:  # torch.export's own messages are long; keep the first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise McuError(f"torch.export could not capture the model{user_frame(exc.__traceback__)}: {first}",
                       hint="the model must be traceable by torch.export with static shapes") from None
