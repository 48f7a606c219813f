"""Compiling a model the way a new user holds it, still in training mode in a notebook: mcu compiles an eval-mode
copy and leaves the caller's module (its mode and its parameters) as it was; a module that cannot be copied is
switched to eval in place with one warning naming the submodules that changed."""

from __future__ import annotations

import threading
import warnings

import torch
from torch import nn

import mcu
from mcu.api import lower

from test_seams_w4a8 import Heads


class _CellLoop(nn.Module):
    """A GRU cell stepped in a Python loop, with attention dropout on the steps' states."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 8)
        self.attn = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], 8)
        states = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            states.append(h)
        s = torch.stack(states, dim=1)
        y, _ = self.attn(s, s, s, need_weights=False)
        return self.out(y.mean(dim=1))


class _Locked(nn.Module):
    """Holds a lock, which deepcopy refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.2), nn.Linear(6, 2))
        self.lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _our_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "eval mode" in str(w.message)]


def test_lowering_a_training_model_leaves_it_training_and_unshared() -> None:
    torch.manual_seed(0)
    model = Heads().train()
    x = torch.randn(2, 12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(model, (x,))
    assert not _our_warnings(caught)
    assert all(m.training for m in model.modules())
    own = lowered.spec.model
    assert own is not model and not any(m.training for m in own.modules())
    # training on after the compile changes neither the other's weights nor its batch statistics
    before = own.body[0].weight.detach().clone()
    with torch.no_grad():
        model.body[0].weight.add_(1.0)
    model(torch.randn(4, 12))
    assert torch.equal(own.body[0].weight, before)
    assert not torch.equal(own.body[1].running_mean, model.body[1].running_mean)


def test_a_training_cell_loop_with_attention_compiles_as_evaluated() -> None:
    torch.manual_seed(1)
    model = _CellLoop().train()
    x = torch.randn(1, 5, 4)
    cm = mcu.compile(model, (x,), board="host")
    assert all(m.training for m in model.modules())
    got = torch.as_tensor(cm.run(x)[0])
    # dropout off: the compiled model is the evaluated one, not one random training draw
    torch.testing.assert_close(got, model.eval()(x).detach(), rtol=0, atol=1e-5)


def test_an_uncopyable_model_is_switched_in_place_with_one_warning_naming_what_changed() -> None:
    model = _Locked().train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower(model, (torch.randn(1, 6),))
    [message] = _our_warnings(caught)
    assert "could not be copied" in message and "fc.1" in message and "model.train()" in message
    assert lowered.spec.model is model and not any(m.training for m in model.modules())


def test_an_uncopyable_model_already_in_eval_is_not_warned_about() -> None:
    model = _Locked().eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lower(model, (torch.randn(1, 6),))
    assert not _our_warnings(caught)
