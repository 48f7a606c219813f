"""The int8 kernels' plain loops of cores without a one-instruction 64-bit multiply-accumulate
(Cortex-M0+, ARMv6-M), bit-exact with the Python reference.

The host build takes the MCU_S8_WIDE paths (runtime_c/kernels/common/plain_s8.h), as the Cortex-M3
does, so the loops the M0+ runs are built here a second time with ``-DMCU_S8_NO_WIDE`` and the plain
kernels' property tests and overlap-contract tests run against that build. (On the boards, the M0+
firmware builds of tests/device/test_boards_m0plus.py run them natively.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cbind_s8 as cb
from mcu.paths import kernels_dir
from host_builds import build_host_variant, load_bound
from s8_properties import (  # noqa: F401  (run here against the narrow build: the module's lib fixture)
    test_conv2d_s8, test_conv2d_s8_forward_overlap, test_depthwise_conv2d_s8, test_depthwise_s8_forward_and_inplace,
    test_linear_s8, test_pointwise_s8_both_directions)

REPO = Path(__file__).resolve().parents[2]
RT = REPO / "runtime_c"


def build_narrow_lib() -> Path:
    """The host library without the MCU_S8_WIDE paths."""
    return build_host_variant("MCU_S8_NO_WIDE", "narrow")


@pytest.fixture(scope="module")
def narrow():
    return load_bound(build_narrow_lib())


@pytest.fixture(scope="module", autouse=True)
def _use_narrow(narrow):
    """Route the shared ctypes helpers (cbind_s8.lib()) to the narrow build for this module."""
    original = cb.lib
    cb.lib = lambda: narrow
    yield
    cb.lib = original


@pytest.fixture(scope="module")
def lib(narrow):
    return narrow


def test_narrow_build_is_another_build() -> None:
    """The switch the build uses exists in the header that selects the paths."""
    text = (kernels_dir() / "common" / "plain_s8.h").read_text()
    assert "!defined(MCU_S8_NO_WIDE)" in text
    assert build_narrow_lib().exists()


