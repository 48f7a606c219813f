"""The int8 spatial mean's DSP path (runtime_c/kernels/pooling/mcu_mean_hw_s8.c) on the simulated
Cortex-M33 and M4 themselves: its requantization of four sums is hand-written assembly that only the Arm cores run
(tests/kernels/test_kernels_s8_opt.py runs the rest of the path on the host). One firmware a core runs the
reference models' shapes, every input at -128 or 127 with the exact mean's multiplier, one pixel, more than
256 pixels (the 16-bit lane sums flushed), channel counts around multiples of 4 and 8, batches, rounding
ties, shifts outside the one-SMLAL range and activation clamps, and compares every output
byte with the Python reference.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mcu.reference.pool import mean_hw_s8
from mve_cases import MODES, Builder, Case, assert_case, c_dims, mean_case, run_cases
from repo import requires_qemu

SEED = 20261207
pytestmark = [requires_qemu, pytest.mark.qemu, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")]


def build_cases() -> Builder:
    rng = np.random.default_rng(SEED)
    b = Builder()
    mean_case(b, rng, c=256, h=3, w=3)  # mobilenet_v1
    mean_case(b, rng, c=64, h=25, w=5)  # ds_cnn
    for c, h, w, fill, zp in [(256, 3, 3, -128, -60), (13, 1, 1, 127, 60), (12, 1, 1, -128, 127), (8, 24, 24, 127, 60),
                              (19, 17, 17, -128, -60), (20, 16, 16, 127, -128), (5, 33, 9, -128, 0)]:
        mean_case(b, rng, c=c, h=h, w=w, fill=fill, zp_in=zp)
    mean_case(b, rng, c=12, h=48, w=48, mode="ends")
    # Outputs spread over int8 (mean_case's random quantizations mostly clamp): the mean's own scale
    # times up to 4, then multiplier 2^30 with shifts in [-3, -1] on small values (rounding ties).
    for c, h, w in [(256, 3, 3), (64, 25, 5), (13, 2, 3), (20, 4, 4), (12, 1, 1), (9, 17, 16)]:
        x = rng.integers(-128, 128, (1, h, w, c), dtype=np.int8)
        frac, exp = np.frexp(float(rng.uniform(1.0, 4.0)) / (h * w))
        _spread_case(b, x, int(rng.integers(-128, 128)), min(int(round(frac * 2**31)), 2**31 - 1), int(exp))
        x = rng.integers(-3, 4, (2, h, w, c), dtype=np.int8)
        _spread_case(b, x, int(rng.integers(-3, 4)), 2**30, int(rng.integers(-3, 0)))
    for c in [1, 3, 4, 7, 8, 9, 12, 15, 16, 17, 20, 33]:
        mean_case(b, rng, c=c, h=int(rng.integers(1, 10)), w=int(rng.integers(1, 10)), n=int(rng.integers(1, 3)),
                  mode=MODES[int(rng.integers(0, len(MODES)))])
    return b


def _spread_case(b: Builder, x: np.ndarray, zp_in: int, m: int, s: int) -> None:
    n, h, w, c = x.shape
    y = mean_hw_s8(x, input_offset=-zp_in, multiplier=m, shift=s, output_offset=0)
    xs = b.arr("int8_t", x)
    out_off = x.size + 16
    call = f"""
    {{
        const mcu_mean_hw_s8_params p = {{{c_dims(n, h, w, c)}, {-zp_in}, {m}, {s}, 0, -128, 127}};
        copy(work, {xs}, {x.size});
        status = mcu_mean_hw_s8(&p, work, work + {out_off});
        emit(work + {out_off}, {y.size});
    }}"""
    b.add(Case("mean_hw", call, y.reshape(-1)), out_off + y.size)


@pytest.mark.parametrize("board", ["mps2-an505-u575", "mps2-an386-l4r5"])
def test_mean_dsp_path_equals_reference(board: str) -> None:
    b = build_cases()
    got = run_cases(b, ["mcu_mean_hw_s8.c"], f"test_mean_s8_device_{board}", board_name=board)
    for i, case in enumerate(b.cases):
        assert_case(i, case, got)
    assert len(b.cases) >= 20
