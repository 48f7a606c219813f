"""The w8a16 GRU whole-model cases (tests/quantize/test_w8a16_gru.py, bench/w8a16_gru.py): a two-layer GRU
classifier and a GRUCell stepped in a Python loop, with their seeded calibration and test data, lowered once per
mode."""

from __future__ import annotations

import functools

import torch
from torch import nn

from cell_models import StateLoop
from mcu.api import LoweredModel, lower


class GruClassifier(nn.Module):
    """Two GRU layers over a time-first sequence, the last step classified."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(5, 8, num_layers=2)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.gru(x)
        return self.fc(seq[-1])


class GruCellLoop(StateLoop):
    """A GRUCell stepped over a batch-first sequence from the zero state, the last state classified."""

    def __init__(self) -> None:
        super().__init__(nn.GRUCell)


def _data(shape: tuple[int, ...], count: int, seed: int) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*shape, generator=g) * 2,) for _ in range(count)]


@functools.lru_cache(maxsize=None)
def lowered(kind: str, quantize: str) -> LoweredModel:
    """``kind`` "gru" (GruClassifier) or "cell" (GruCellLoop), seeded weights, six calibration and three test
    inputs."""
    torch.manual_seed(3)
    model, shape = (GruClassifier(), (6, 2, 5)) if kind == "gru" else (GruCellLoop(), (2, 6, 5))
    calibration = _data(shape, 6, 1)
    return lower(model.eval(), calibration[0], quantize=quantize, calibration=calibration,
                 test_inputs=_data(shape, 3, 2), name=f"{kind}_{quantize}")
