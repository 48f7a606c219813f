"""Model state: buffers a method mutates with index_put_ (a KV cache) become persistent state at
the start of the arena, written in place by mcu_index_put at the new positions only, never copied whole."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import cbind
import mcu
from mcu.errors import McuError
from mcu.reference import state as state_ref
from mcu.reference.interp import Reference
from repo import requires_qemu
from state_checks import reads_whole_state_into_a_copy

_P = ctypes.c_void_p
HEADS, HEAD_DIM, CONTEXT = 2, 3, 8


class IndexPutParams(ctypes.Structure):
    _fields_ = [("outer", ctypes.c_int32), ("axis", ctypes.c_int32), ("inner", ctypes.c_int32),
                ("count", ctypes.c_int32)]


def _lib():
    lib = cbind.lib()
    lib.mcu_index_put.argtypes = [_P, ctypes.c_int32, _P, _P, _P]
    return lib


# --- the kernel -----------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**31 - 1),
       st.sampled_from([np.float32, np.int8]))
def test_index_put_equals_reference(outer: int, axis: int, inner: int, count: int, seed: int, dtype) -> None:
    rng = np.random.default_rng(seed)
    state = rng.integers(-100, 100, outer * axis * inner).astype(dtype)
    indices = rng.integers(-axis, axis, count).astype(np.int32)  # negative positions and repeats too
    values = rng.integers(-100, 100, outer * count * inner).astype(dtype)
    want = state_ref.index_put(state, indices, values, outer, axis, inner)
    p = IndexPutParams(outer, axis, inner, count)
    got = state.copy()
    status = _lib().mcu_index_put(ctypes.addressof(p), np.dtype(dtype).itemsize, cbind.ptr(indices),
                                  cbind.ptr(values), cbind.ptr(got))
    assert status == cbind.MCU_OK
    np.testing.assert_array_equal(got, want)
    # only the written rows change
    written = {int(i) % axis for i in indices}
    untouched = [a for a in range(axis) if a not in written]
    np.testing.assert_array_equal(got.reshape(outer, axis, inner)[:, untouched],
                                  state.reshape(outer, axis, inner)[:, untouched])


def test_index_put_refuses_bad_positions_before_writing() -> None:
    state = np.arange(8, dtype=np.float32)
    before = state.copy()
    p = IndexPutParams(1, 8, 1, 2)
    for bad in ([1, 8], [-9, 0]):
        idx = np.array(bad, np.int32)
        status = _lib().mcu_index_put(ctypes.addressof(p), 4, cbind.ptr(idx), cbind.ptr(np.ones(2, np.float32)),
                                      cbind.ptr(state))
        assert status == cbind.MCU_ERR_INVALID_ARG
        np.testing.assert_array_equal(state, before)
    assert _lib().mcu_index_put(ctypes.addressof(p), 4, cbind.ptr(np.zeros(2, np.int32)), cbind.ptr(state[:2]),
                                cbind.ptr(state)) == cbind.MCU_ERR_INVALID_ARG  # values inside the state


# --- a model with a cache -----------------------------------------------------------------------------------


class Cache(nn.Module):
    """Keys stored as [heads, head_dim, context] (written along the last dim), values as [heads, context,
    head_dim] (the middle one), as the language model's KV cache; reads over the whole cache after the
    writes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(HEADS, HEAD_DIM, CONTEXT), persistent=False)
        self.register_buffer("v_cache", torch.zeros(HEADS, CONTEXT, HEAD_DIM), persistent=False)

    def forward(self, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.k_cache[:, :, pos] = k * 2.0
        self.v_cache[:, pos] = v + 1.0
        return self.k_cache * 0.5, self.v_cache - 1.0


def _inputs(t: int, start: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(HEADS, HEAD_DIM, t, generator=g), torch.randn(HEADS, t, HEAD_DIM, generator=g),
            torch.arange(start, start + t))


_CACHE: dict[str, mcu.api.CompiledModel] = {}


def _compiled(name: str) -> mcu.api.CompiledModel:
    if name not in _CACHE:
        t, start = (3, 0) if name == "prefill" else (1, 3)
        x = _inputs(t, start)
        _CACHE[name] = mcu.compile(Cache().eval(), x, test_inputs=[x], name=f"cache_{name}")
    return _CACHE[name]


@pytest.mark.parametrize("name", ["prefill", "decode"])
def test_cache_writes_are_in_place_index_puts(name: str) -> None:
    cm = _compiled(name)
    graph = cm.graph
    assert set(graph.state) == {"k_cache", "v_cache"}
    puts = [op for op in graph.ops if op.kind == "index_put"]
    assert len(puts) == 2
    t = 3 if name == "prefill" else 1
    for op in puts:
        assert op.output.base() is graph.state[op.attrs["state"]]  # writes the state's own bytes
        assert op.inputs[0].numel == HEADS * HEAD_DIM * t  # and only the new positions
    k, v = (next(op for op in puts if op.attrs["state"] == s) for s in ("k_cache", "v_cache"))
    assert (k.attrs["outer"], k.attrs["axis"], k.attrs["inner"]) == (HEADS * HEAD_DIM, CONTEXT, 1)
    assert (v.attrs["outer"], v.attrs["axis"], v.attrs["inner"]) == (HEADS, CONTEXT, HEAD_DIM)
    assert not reads_whole_state_into_a_copy(graph)
    # no op but index_put writes into the state
    states = {id(s) for s in graph.state.values()}
    assert all(op.kind == "index_put" or op.attrs.get("alias") for op in graph.ops if id(op.output.base()) in states)


def test_state_sits_at_the_start_of_the_arena_in_every_method() -> None:
    layouts = []
    for name in ("prefill", "decode"):
        cm = _compiled(name)
        layouts.append({s: cm.memory.offset(t) for s, t in cm.graph.state.items()})
        nbytes = 4 * HEADS * HEAD_DIM * CONTEXT
        assert sorted(layouts[-1].values()) == [0, nbytes]
        # nothing else is planned inside the state region
        others = [cm.memory.offset(t) for op in cm.graph.ops for t in (*op.inputs, *op.outputs)
                  if not t.is_constant and id(t.base()) not in {id(s) for s in cm.graph.state.values()}]
        assert min(others) >= 2 * nbytes
        assert cm.memory.live_set >= 2 * nbytes and cm.memory.arena_size >= 2 * nbytes
    assert layouts[0] == layouts[1]  # the methods agree where the state is


@pytest.mark.parametrize("name", ["prefill", "decode"])
def test_cache_model_equals_eager_on_a_fresh_state(name: str) -> None:
    cm = _compiled(name)
    x = cm.spec.test_inputs[0]
    eager = [y.numpy().reshape(-1) for y in Cache().eval()(*x)]
    want = Reference(cm.graph).run(cm.encode_inputs(x))
    for got, e, w in zip(cm.run_raw(*x), eager, want):  # the program interpreter (a fresh arena per call)
        np.testing.assert_array_equal(got, e)
        np.testing.assert_array_equal(got, w)


def test_generated_c_keeps_the_state_between_calls() -> None:
    """The generated library's arena is static: prefill then decode steps see the earlier writes."""
    cm = _compiled("decode")
    eager = Cache().eval()
    for step in range(4):
        x = _inputs(1, step, seed=step)
        want = [y.numpy().reshape(-1) for y in eager(*x)]
        got = cm.run_raw_c(*x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


class _Bad(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.register_buffer("buf", torch.zeros(4, 2) + (how == "nonzero"), persistent=False)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if self.how == "copy":
            self.buf.copy_(x * 3.0)
        elif self.how == "add":
            self.buf.add_(1.0)
        elif self.how == "read first":
            y = self.buf * 2.0
            self.buf[pos] = x
            return y
        else:
            self.buf[pos] = x
        return self.buf * 1.0


@pytest.mark.parametrize("how, message", [("copy", "updated by something other than index_put_"),
                                          ("add", "updated by something other than index_put_"),
                                          ("read first", "as it was before this call wrote it"),
                                          ("nonzero", "does not start at zero")])
def test_unsupported_state_updates_are_named(how: str, message: str) -> None:
    x = torch.randn(4 if how == "copy" else 1, 2)
    with pytest.raises(McuError, match=message) as info:
        mcu.compile(_Bad(how).eval(), (x, torch.tensor([1])))
    assert "buf" in str(info.value)


def test_generated_header_exposes_the_state() -> None:
    cm = _compiled("decode")
    header = next(text for name, text in cm.library.files.items() if name.endswith("_model.h"))
    prefix = cm.library.prefix.upper()
    nbytes = 4 * HEADS * HEAD_DIM * CONTEXT
    assert f"#define {prefix}_STATE_BYTES {2 * nbytes}" in header
    assert f"#define {prefix}_STATE_K_CACHE_OFFSET 0" in header
    assert f"#define {prefix}_STATE_V_CACHE_OFFSET {nbytes}" in header
    assert f"void {cm.library.prefix}_reset_state(void);" in header


@requires_qemu
@pytest.mark.qemu
def test_cache_model_on_qemu() -> None:
    """Two bundled vectors, each from a cleared state (the harness resets it), on the simulated M33."""
    x0, x1 = _inputs(1, 3, seed=1), _inputs(1, 6, seed=2)
    cm = mcu.compile(Cache().eval(), x0, test_inputs=[x0, x1], name="cache_qemu")
    sim = cm.simulate()
    assert sim.passed, sim.console[-2000:]
    assert sim.max_abs_error_vs_eager == 0.0
