"""XNNPACK as a delegate backend through the C delegate registry (runtime_c/include/mcu/delegate.h),
on the `host` (native x86-64) and `arm64-linux` (qemu-aarch64) boards.

Bounds: fp32 within 1e-5 of the largest eager output; int8 within 2 LSB of the Python
integer reference with the same top-1 class, on every bundled input.
"""

from __future__ import annotations

import ctypes
import dataclasses
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from compiled import compiled_model, lowered_model
from mcu.api import CompiledModel, LoweredModel, compile_spec, lower_spec
from mcu.backends.base import PartitionReport
from mcu.backends.xnnpack.core import XnnpackBackend
from mcu.device.boards import load_board
from mcu.capture.loader import load_model_file, spec_from_objects
from mcu.paths import runtime_dir
from mcu.device.sim.linux import expectations, run_on_linux
from repo import EXAMPLES, REFERENCE_MODELS

HAVE_XNNPACK = Path("/usr/include/xnnpack.h").is_file() and shutil.which("gcc") is not None
requires_xnnpack = pytest.mark.skipif(
    not HAVE_XNNPACK, reason="needs Debian's libxnnpack-dev and libpthreadpool-dev and gcc (run scripts/setup)")
ARM64_SYSROOT = Path(sys.prefix) / "arm64-sysroot"
HAVE_ARM64 = (ARM64_SYSROOT / "usr/include/xnnpack.h").is_file() and shutil.which("aarch64-linux-gnu-gcc") \
    is not None and shutil.which("qemu-aarch64") is not None
BOARDS = ["host", pytest.param("arm64-linux", marks=pytest.mark.skipif(
    not HAVE_ARM64, reason="needs aarch64-linux-gnu-gcc, qemu-aarch64 and the arm64 XNNPACK sysroot "
                           f"{ARM64_SYSROOT} (run scripts/setup --arm64)"))]

_COMPILED: dict[tuple[str, str], tuple[CompiledModel, PartitionReport]] = {}
# One xdist worker per example (tests/conftest.py), the one that lowers it for the other files' tests too.
GROUP_BY_EXAMPLE = True


XNNPACK_FIRST = ["xnnpack", "portable"]


def compile_xnnpack(spec, board: str, quantize: str) -> tuple[CompiledModel, PartitionReport]:
    """The model with XNNPACK first in the preference order (then the portable kernels)."""
    model = compile_spec(spec, board, quantize, backend=XNNPACK_FIRST)
    return model, model.partitions


def delegated(name: str, quantize: str) -> tuple[CompiledModel, PartitionReport]:
    """(XNNPACK + portable model on `host`, its partition report), compiled once per session from the example
    lowered once per session (tests/support/compiled.py)."""
    key = (name, quantize)
    if key not in _COMPILED:
        model = lowered_model(name, quantize).compile("host", backend=XNNPACK_FIRST)
        _COMPILED[key] = (model, model.partitions)
    return _COMPILED[key]


def on_board(model: CompiledModel, board: str) -> CompiledModel:
    """The same compiled model for another Linux board (the plan does not depend on which)."""
    return model if model.board.name == board else dataclasses.replace(model, board=load_board(board))


def xnnpack_ops(report: PartitionReport) -> int:
    return sum(len(ops) for backend, ops in report.partitions if backend == "xnnpack")


@requires_xnnpack
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_reference_model_runs_through_xnnpack(name: str, quantize: str, board: str) -> None:
    model, report = delegated(name, quantize)
    refused = {r.op for r in report.refusals if r.backend == "xnnpack"}
    # XNNPACK takes every op it supports: what it refused are only aliasing reshapes (no code) and,
    # at int8, the per-channel fully connected layers that 2022 version lacks.
    for r in report.refusals:
        assert r.why.startswith(("no xnnpack support for reshape", "per-channel int8 fully connected")), r
    if quantize == "none" or name != "fc_autoencoder":
        assert xnnpack_ops(report) >= 1
    assert all(op.kind != "reshape" or op.name in refused for op in model.graph.ops)
    expected, tolerances = expectations(model)
    run = run_on_linux(on_board(model, board), expected, tolerances)
    assert run.passed, f"{name} {quantize} on {board}: max error {run.max_error} (tolerance {tolerances[0]}), " \
                       f"top-1 same {run.same_top1}\n{run.console[-2000:]}"
    assert run.max_error <= tolerances[0]


class Mixed(nn.Module):
    """Ops XNNPACK 2022-02-16 refuses in the middle of ops it takes: a permute (no transpose), and at
    int8 the softmax and the per-channel fully connected layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        y = y.permute(0, 1, 3, 2)
        y = torch.relu(self.c2(y))
        return torch.softmax(self.fc(y.mean((2, 3))), dim=1)


_MIXED: dict[str, LoweredModel] = {}


@requires_xnnpack
@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_refused_ops_run_as_portable_partitions(quantize: str, board: str) -> None:
    if quantize not in _MIXED:  # quantized and lowered once, compiled for each board
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        xs = [(torch.randn(1, 3, 12, 10, generator=gen),) for _ in range(8)]
        spec = spec_from_objects(Mixed().eval(), xs[0], calibration=xs, test_inputs=xs[:3], name="mixed")
        _MIXED[quantize] = lower_spec(spec, quantize)
    model = _MIXED[quantize].compile(board, backend=XNNPACK_FIRST)
    report = model.partitions
    backends = [b for b, _ in report.partitions]
    assert backends[:3] == ["xnnpack", "portable", "xnnpack"]
    assert report.graph_breaks >= 2
    why = {r.op: r.why for r in report.refusals if r.backend == "xnnpack"}
    assert "transpose" in why["permute"]
    if quantize == "int8":
        assert why["_softmax"] == "int8 softmax is not in XNNPACK 2022-02-16"
        assert backends[-1] == "portable"
    else:
        assert "_softmax" in report.partitions[-1][1] and backends[-1] == "xnnpack"
    as_json = report.to_json()
    assert as_json["graph_breaks"] == report.graph_breaks and as_json["refusals"]
    expected, tolerances = expectations(model)
    run = run_on_linux(model, expected, tolerances)
    assert run.passed and run.max_error <= tolerances[0], run.console[-2000:]


def test_xnnpack_refuses_with_reasons_and_payloads_are_deterministic() -> None:
    _, report = delegated("fc_autoencoder", "int8")
    assert xnnpack_ops(report) == 0
    assert {r.why for r in report.refusals} == {"per-channel int8 fully connected is not in XNNPACK 2022-02-16"}
    a, _ = compile_xnnpack(load_model_file(EXAMPLES / "small_cnn.py"), "host", "none")
    b, _ = delegated("small_cnn", "none")[:2]
    payloads = [[op.attrs["payload"] for op in m.graph.ops if op.kind == "delegate"] for m in (a, b)]
    assert payloads[0] == payloads[1] and payloads[0]
    assert all(p[:4] == b"XNNP" and struct.unpack_from("<I", p, 4)[0] == XnnpackBackend.version
               for p in payloads[0])


@requires_xnnpack
@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("name", ["small_cnn", "resnet8"])
def test_program_interpreter_runs_xnnpack_partitions_like_generated_c(name: str, quantize: str) -> None:
    """The in-process interpreter (host extension, XNNPACK registered) and the generated C run the same
    payloads through the same registry: identical outputs."""
    model, _ = delegated(name, quantize)
    method = model.runtime_program().method("forward")  # raises if the extension lacks XNNPACK
    for x in model.spec.test_inputs[:2]:
        interpreted = method.run_raw(*model.encode_inputs(x))
        generated = model.run_raw_c(*x)
        assert all(np.array_equal(a, b) for a, b in zip(interpreted, generated))


@requires_xnnpack
def test_exported_delegated_library_builds_with_its_cmake(tmp_path: Path) -> None:
    from mcu.commands.export import export_library

    model, _ = delegated("small_cnn", "none")
    export_library(model.library, tmp_path / "lib")
    cmake = (tmp_path / "lib" / "CMakeLists.txt").read_text()
    assert "target_link_libraries(small_cnn PUBLIC XNNPACK)" in cmake
    assert (tmp_path / "lib" / "runtime" / "mcu_xnnpack.c").is_file()
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(app C)\nadd_subdirectory(lib)\n"
        "add_executable(app main.c)\ntarget_link_libraries(app PRIVATE small_cnn)\n")
    (tmp_path / "main.c").write_text(
        "#include \"small_cnn_model.h\"\nint main(void) {\n    static float x[784], y[10];\n"
        "    mcu_status s = small_cnn_run(x, y);\n    small_cnn_deinit();\n    return s == MCU_OK ? 0 : 1;\n}\n")
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(build), "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    assert subprocess.run([str(build / "app")], timeout=60).returncode == 0


def test_xnnpack_is_unavailable_on_microcontrollers() -> None:
    model = lowered_model("small_cnn", "none").compile("mps2-an505", backend=XNNPACK_FIRST)
    report = model.partitions
    assert [b for b, _ in report.partitions] == ["portable"]
    assert report.refusals[0].op == "*" and "Linux boards" in report.refusals[0].why
    assert not any(op.kind == "delegate" for op in model.graph.ops)


def test_model_without_delegates_links_no_registry() -> None:
    model, _ = delegated("small_cnn", "int8")
    plain = compiled_model("small_cnn", "mps2-an505", "none")
    assert plain.library.runtime_sources == ["src/mcu_status.c"] and not plain.library.libraries
    assert not any("delegate" in text for text in plain.library.files.values())
    assert "src/mcu_delegate.c" in model.library.runtime_sources
    assert model.library.libraries == ["-lXNNPACK", "-lpthreadpool"]


# --- the registry in C: payloads for another backend or version, or corrupt ones, refused at init --------

MCU_OK, MCU_ERR_SHAPE = 0, 3
MCU_ERR_DELEGATE_BACKEND, MCU_ERR_DELEGATE_VERSION, MCU_ERR_DELEGATE_PAYLOAD, MCU_ERR_DELEGATE_FAILED = 14, 15, 16, 17


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    rt = runtime_dir()
    out = tmp_path_factory.mktemp("delegate") / "libdelegate.so"
    sources = [rt / "src" / "mcu_delegate.c", rt / "src" / "mcu_status.c", rt / "backends/xnnpack/mcu_xnnpack.c"]
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    f"-I{rt / 'include'}", *map(str, sources), "-o", str(out), "-lXNNPACK", "-lpthreadpool"],
                   check=True)
    lib = ctypes.CDLL(str(out))
    lib.mcu_delegate_init.restype = ctypes.c_int
    lib.mcu_delegate_execute.restype = ctypes.c_int
    return lib


def _init(lib: ctypes.CDLL, payload: bytes) -> tuple[int, ctypes.c_void_p, ctypes.Array]:
    buf = (ctypes.c_uint8 * len(payload)).from_buffer_copy(payload)  # must outlive the handle
    handle = ctypes.c_void_p()
    backend = ctypes.c_void_p.in_dll(lib, "mcu_xnnpack_backend")
    status = lib.mcu_delegate_init(ctypes.byref(backend), buf, ctypes.c_uint32(len(payload)), None,
                                   ctypes.c_uint32(0), ctypes.byref(handle))
    return status, handle, buf


@requires_xnnpack
def test_payload_checks_at_init(registry: ctypes.CDLL) -> None:
    model, _ = delegated("fc_autoencoder", "none")  # one partition: the whole model
    (op,) = [op for op in model.graph.ops if op.kind == "delegate"]
    payload = bytes(op.attrs["payload"])
    backend = ctypes.c_void_p.in_dll(registry, "mcu_xnnpack_backend")

    status, handle, keep = _init(registry, payload)
    assert status == MCU_OK and handle.value
    x = model.spec.test_inputs[0][0].numpy().astype(np.float32).reshape(-1)
    y = np.zeros(op.outputs[0].numel, np.float32)
    tensors = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    sizes = (ctypes.c_uint32 * 2)(x.nbytes, y.nbytes)
    assert registry.mcu_delegate_execute(ctypes.byref(backend), handle, tensors, sizes, 1, 1) == MCU_OK
    eager = model.eager_outputs[0][0].reshape(-1)
    assert float(np.max(np.abs(y - eager))) <= 1e-5 * float(np.max(np.abs(eager)))
    wrong = (ctypes.c_uint32 * 2)(x.nbytes - 4, y.nbytes)
    assert registry.mcu_delegate_execute(ctypes.byref(backend), handle, tensors, wrong, 1, 1) == MCU_ERR_SHAPE
    registry.mcu_delegate_destroy(ctypes.byref(backend), ctypes.byref(handle))
    assert not handle.value

    other_version = payload[:4] + struct.pack("<I", XnnpackBackend.version + 1) + payload[8:]
    assert _init(registry, other_version)[0] == MCU_ERR_DELEGATE_VERSION
    assert _init(registry, b"NPU0" + payload[4:])[0] == MCU_ERR_DELEGATE_BACKEND
    assert _init(registry, payload[:6])[0] == MCU_ERR_DELEGATE_BACKEND
    flipped = bytearray(payload)
    flipped[len(payload) // 2] ^= 0x10  # one bit in the weights: the checksum catches it
    assert _init(registry, bytes(flipped))[0] == MCU_ERR_DELEGATE_PAYLOAD
    assert _init(registry, payload[:-16])[0] == MCU_ERR_DELEGATE_PAYLOAD  # truncated
    # A valid checksum over a body that lies about its value count: the reader's bounds checks refuse it
    # (or XNNPACK refuses the values it made of node bytes).
    body = bytearray(payload)
    n_values = struct.unpack_from("<I", body, 16)[0]
    struct.pack_into("<I", body, 16, n_values + 1000)
    struct.pack_into("<I", body, 12, zlib.crc32(bytes(body[16:])))
    assert _init(registry, bytes(body))[0] in (MCU_ERR_DELEGATE_PAYLOAD, MCU_ERR_DELEGATE_FAILED)
