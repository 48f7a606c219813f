"""The module mcu compiles: an eval-mode copy of the caller's, so that compiling leaves the caller's module as it
was (a notebook that compiles between epochs goes on training with dropout and batch statistics), and what was
compiled does not change when the caller trains on."""

from __future__ import annotations

import copy
import warnings

import torch


def eval_copy(model: torch.nn.Module, where: str) -> torch.nn.Module:
    """``model`` in eval mode without touching the caller's: a deep copy. A module that refuses to be copied (it
    holds a lock, a file or a generator) is switched to eval in place, with one warning naming the submodules
    that were training. A converted pt2e module is returned as it is (it refuses ``.eval()`` and is not trained)."""
    if isinstance(model, torch.fx.GraphModule):
        return model
    try:
        own = copy.deepcopy(model)
    except Exception as exc:  # whatever the module's own __deepcopy__ or attributes raise
        training = [name or type(model).__name__ for name, m in model.named_modules() if m.training]
        if training:
            shown = ", ".join(training[:4]) + (f" and {len(training) - 4} more" if len(training) > 4 else "")
            warnings.warn(f"{where}: the model could not be copied ({type(exc).__name__}: {exc}), so mcu switched "
                          f"it to eval mode in place ({shown} were training); call model.train() to train on",
                          UserWarning, stacklevel=4)
        return model.eval()
    return own.eval()
