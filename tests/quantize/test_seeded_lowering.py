"""The w8a16 tests' seeded models are lowered once per process (tests/support/int16_checks.py lowered_seeded):
the same arguments take the lowered model already made, any changed argument lowers anew."""

from __future__ import annotations

import numpy as np
from torch import nn

from int16_checks import compile_seeded, lowered_seeded


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU())


def _weights(lowered) -> list[np.ndarray]:
    return [t.data for op in lowered.graph.ops for t in op.inputs if t.data is not None]


def test_the_same_arguments_share_one_lowering_and_a_changed_one_misses() -> None:
    first = lowered_seeded(_tiny, (1, 4), "tiny", "int8", seed=1, samples=4)
    assert lowered_seeded(_tiny, (1, 4), "tiny", "int8", seed=1, samples=4) is first
    reseeded = lowered_seeded(_tiny, (1, 4), "tiny", "int8", seed=2, samples=4)
    assert reseeded is not first
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(first), _weights(reseeded)))
    # each compile works on its own copy: the shared lowering is left as it was
    before = [w.copy() for w in _weights(first)]
    compile_seeded(_tiny, (1, 4), "tiny", "int8", "mps2-an505", seed=1, samples=4)
    assert all(np.array_equal(a, b) for a, b in zip(before, _weights(first)))
