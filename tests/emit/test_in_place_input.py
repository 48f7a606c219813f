"""An input only kernel calls read is read in the caller's buffer when it is 4-byte aligned, copied into the
arena otherwise (and quantized there by run_f32): every way gives the Python reference's outputs."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from mcu.emit.c_model import in_place_candidates


@pytest.fixture(scope="module")
def int8_cnn(compiled):
    return compiled("small_cnn", quantize="int8")


def _run(cm, data: np.ndarray, at: int) -> np.ndarray:
    """The generated `_run` on the host with the input at byte ``at`` of an aligned buffer."""
    host = cm.host_model()
    fn = getattr(host._dll, f"{cm.library.prefix}_run")
    store = np.zeros(data.nbytes + 16, dtype=np.int8)
    base = -store.ctypes.data % 16
    store[base + at:base + at + data.nbytes] = data.view(np.int8)
    out = np.zeros(cm.library.view.outputs[0].numel, dtype=np.int8)
    assert fn(ctypes.c_void_p(store.ctypes.data + base + at), out.ctypes.data_as(ctypes.c_void_p)) == 0
    assert (store[base + at:base + at + data.nbytes] == data.view(np.int8)).all()  # read, never written
    return out


def test_the_first_convolution_reads_the_input_in_place(int8_cnn) -> None:
    view = int8_cnn.library.view
    assert [io.in_place for io in view.inputs] == [True]
    model_c = int8_cnn.library.files[f"{view.prefix}_model.c"]
    assert "(int8_t *)in0" in model_c and "_invoke(in0)" in model_c
    assert "input0 is read in place instead when it is 4-byte aligned" in int8_cnn.library.files[f"{view.prefix}_model.h"]


@pytest.mark.parametrize("at", [0, 4, 1, 2, 3])
def test_aligned_inputs_in_place_and_others_copied_give_the_reference(int8_cnn, at: int) -> None:
    for x in int8_cnn.spec.test_inputs:
        data = int8_cnn.encode_inputs(x)[0]
        want = int8_cnn.reference_raw(*x)[0]
        np.testing.assert_array_equal(_run(int8_cnn, data, at), want.reshape(-1))


def test_run_f32_quantizes_into_the_arena_and_runs_from_there(int8_cnn) -> None:
    host = int8_cnn.host_model()
    fn = getattr(host._dll, f"{int8_cnn.library.prefix}_run_f32")
    for x in int8_cnn.spec.test_inputs:
        data = np.ascontiguousarray(int8_cnn.encode_inputs(x)[0], dtype=np.int8)
        t = int8_cnn.graph.inputs[0]
        real = (data.astype(np.float32) - t.quant.zero_point[0]) * np.float32(t.quant.scale[0])
        out = np.zeros(int8_cnn.library.view.outputs[0].numel, dtype=np.float32)
        assert fn(real.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p)) == 0
        want = _run(int8_cnn, data, 1).astype(np.float32)  # the copied path, checked above
        o = int8_cnn.graph.outputs[0]
        np.testing.assert_allclose(out, (want - o.quant.zero_point[0]) * np.float32(o.quant.scale[0]), rtol=1e-6)


def test_inputs_that_are_outputs_or_read_by_views_stay_copies(int8_cnn) -> None:
    graph = int8_cnn.graph
    assert set(in_place_candidates(graph)) == {id(graph.inputs[0])}
    first = next(op for op in graph.ops if any(t is graph.inputs[0] for t in op.inputs))
    first.attrs["alias"] = True
    try:
        assert in_place_candidates(graph) == {}
    finally:
        del first.attrs["alias"]
