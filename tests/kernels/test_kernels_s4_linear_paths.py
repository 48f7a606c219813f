"""mcu_linear_s4 built with some of its DSP paths left out (the definitions a model's build gets from
mcu/backends/portable/s4_linear.py): a layer whose path is built equals the reference bit for bit, one whose path
is left out is refused, and the Python mirror of the kernel's dispatch names the path the kernel takes."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_ERR_UNSUPPORTED, MCU_OK, ptr
from mcu.backends.calls import KernelCall
from mcu.backends.portable.s4_linear import (ANY_SHIFT, FLAGS, PAIRS, PLAIN, ROWS3, linear_path, s4_linear_defines,
                                             s4_linear_merge)
from mcu.ir import Op, Tensor
from mcu.layouts import pack_s4
from mcu.reference.conv import linear_s8
from repo import ROOT
from s8_cases import assert_equal

RT = ROOT / "runtime_c"
# Each build: the paths it keeps (the others 0).
BUILDS = {"rows3": (ROWS3,), "pairs": (PAIRS,), "plain": (PLAIN,)}


def _build(tmp: Path, name: str, kept: tuple[str, ...]) -> ctypes.CDLL:
    out = tmp / f"libs4_{name}.so"
    defines = [f"-D{flag}={int(flag in kept)}" for flag in FLAGS]
    sources = [RT / "kernels" / "fully_connected" / "mcu_linear_s4.c", *sorted((RT / "src").glob("*.c"))]
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                    "-DMCU_S8_DSP_EMULATE", *defines, f"-I{RT / 'include'}", *map(str, sources), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    handle = ctypes.CDLL(str(out))
    fn = handle.mcu_linear_s4
    fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(cb.LinearS8Params), ctypes.POINTER(cb.PerChannelQuant),
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return handle


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, ctypes.CDLL]:
    tmp = tmp_path_factory.mktemp("s4_linear_paths")
    return {name: _build(tmp, name, kept) for name, kept in BUILDS.items()}


@settings(max_examples=60, deadline=None)
@given(batch=st.sampled_from([1, 1, 2, 3]),
       fin=st.one_of(st.sampled_from([8, 632, 640, 641, 648, 319, 320, 321]), st.integers(1, 80)),
       fout=st.sampled_from([1, 2, 3, 4, 50]), wide_shift=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_each_build_runs_its_paths_and_refuses_the_others(builds, batch, fin, fout, wide_shift, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (batch, fin)).astype(np.int8)
    w = rng.choice(np.array([-8, -7, 0, 7], dtype=np.int8), size=(fout, fin))
    b = rng.integers(-(2**16), 2**16, fout).astype(np.int32)
    m = rng.integers(2**30, 2**31 - 1, fout).astype(np.int64)
    s = rng.integers(-12, -6, fout).astype(np.int64)
    if wide_shift:  # the three-row path's general requantization (a left shift, one channel)
        s[rng.integers(0, fout)] = 1
    params = dict(batch=batch, in_features=fin, out_features=fout, input_offset=int(rng.integers(-127, 129)),
                  output_offset=int(rng.integers(-128, 128)), act_min=-128, act_max=127)
    path = linear_path(batch, fin, fout)
    packed = np.ascontiguousarray(pack_s4(w))
    quant = cb.Quant(m, s, fout)
    for name, kept in BUILDS.items():
        out = np.zeros((batch, fout), dtype=np.int8)
        status = builds[name].mcu_linear_s4(None, ctypes.byref(cb._fields(cb.LinearS8Params, params)),
                                            ctypes.byref(quant.struct), ptr(x), ptr(packed), ptr(b), ptr(out))
        runs = path in kept and not (path == ROWS3 and wide_shift)  # ANY_SHIFT is 0 in every build here
        assert status == (MCU_OK if runs else MCU_ERR_UNSUPPORTED), (name, path)
        if runs:
            assert_equal(out, linear_s8(x, w, b, m, s, **params))


def _call(batch: int, fin: int, fout: int, shift: int = -8) -> tuple[Op, KernelCall]:
    shifts = Tensor(name="s", shape=(fout,), dtype="int32", data=np.full(fout, shift, dtype=np.int32))
    op = Op("linear", [Tensor(name="x", shape=(batch, fin), dtype="int8"), Tensor(name="w", shape=(fout, fin)),
                       Tensor(name="b", shape=(fout,)), Tensor(name="m", shape=(fout,)), shifts],
            [Tensor(name="y", shape=(batch, fout), dtype="int8")])
    call = KernelCall("mcu_linear_s4", [], ["mcu_linear_s4.c"],
                      params={"batch": batch, "in_features": fin, "out_features": fout})
    return op, call


def test_defines_name_the_paths_a_model_takes() -> None:
    # fc_autoencoder's layers: one row of 640, 128 or 8 inputs each
    fc = s4_linear_defines([_call(1, 640, 128), _call(1, 128, 8), _call(1, 8, 128)])
    assert fc == {ROWS3: 1, ANY_SHIFT: 0, PAIRS: 0, PLAIN: 0}
    # mobilenet_v1's classifier (256 -> 2: too few channels for three rows), a left shift, a batch of rows
    assert s4_linear_defines([_call(1, 256, 2)]) == {ROWS3: 0, ANY_SHIFT: 0, PAIRS: 1, PLAIN: 0}
    assert s4_linear_defines([_call(1, 64, 10, shift=1)])[ANY_SHIFT] == 1
    assert s4_linear_defines([_call(1, 1290, 4)]) == {ROWS3: 0, ANY_SHIFT: 0, PAIRS: 0, PLAIN: 1}
    assert s4_linear_defines([]) == {}
    merged = s4_linear_merge([fc, {}, s4_linear_defines([_call(3, 7, 5)])])
    assert merged == {ROWS3: 1, ANY_SHIFT: 0, PAIRS: 1, PLAIN: 0}
    assert s4_linear_merge([{}, {"MCU_S4_STREAM": 0}]) == {}
