"""Model on target: the firmware runs the bundled vectors in QEMU and must pass; fp32 outputs read
back from the device equal eager PyTorch within 1e-4 of the largest |output|."""

from __future__ import annotations

import numpy as np
import pytest

from repo import REFERENCE_MODELS, requires_qemu

FP32_TOL = 1e-4

CASES = ([(m, "mps2-an505") for m in REFERENCE_MODELS] + [(m, "mps2-an386") for m in REFERENCE_MODELS]
         + [("small_cnn", "mps2-an385"), ("fc_autoencoder", "mps2-an385")]
         + [(m, "mps3-an547") for m in REFERENCE_MODELS])


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("name,board", CASES)
def test_reference_model_on_simulated_board(compiled, name: str, board: str) -> None:
    cm = compiled(name, board)
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    assert sim.exit_code == 0
    assert sim.instructions is not None and sim.instructions > 0
    assert len(sim.instructions_all) == len(cm.spec.test_inputs)
    for got_row, want_row in zip(sim.outputs, cm.eager_outputs):
        for got, want in zip(got_row, want_row):
            assert got.shape == want.shape
            assert float(np.max(np.abs(got - want))) <= FP32_TOL * float(np.max(np.abs(want)))
    assert cm.memory.lower_bound <= cm.memory.arena_size <= cm.memory.live_set


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386"])
def test_instruction_count_is_deterministic(compiled, board: str) -> None:
    cm = compiled("small_cnn", board)
    first = cm.simulate()
    second = cm.simulate()
    assert first.instructions == second.instructions
    assert first.instructions_all == second.instructions_all


@requires_qemu
@pytest.mark.qemu
def test_mismatch_fails_the_run(compiled) -> None:
    """A wrong expected output must make the firmware report FAIL and exit non-zero."""
    cm = compiled("fc_autoencoder")
    good = cm.expected_outputs
    try:
        cm.__dict__["expected_outputs"] = [[y + 1.0 for y in row] for row in good]
        sim = cm.simulate()
    finally:
        cm.__dict__["expected_outputs"] = good
    assert not sim.passed
    assert sim.exit_code == 1
    assert "RESULT FAIL" in sim.console
