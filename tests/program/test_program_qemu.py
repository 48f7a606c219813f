"""Program files on the interpreter firmware in QEMU (mps2-an505): one firmware, built once, runs every
program placed in its flash region; its outputs equal the generated-C firmware's bit for bit (int8 and
fp32, same core) and the host extension's (int8); several methods, external weights, bad programs; the
interpreter's own code stays under 13 KiB at -Os on Cortex-M33."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from mcu.device.boards import load_board
from mcu.ir import NUMPY_DTYPES
from mcu.layouts import to_memory_order
from mcu.program.device import (build_interpreter_firmware, interpreter_code_size, program_layout, program_uf2,
                                render_main, run_program)
from mcu.program.writer import program_from
from mcu.program.host import Program
from programs import PROGRAM_MODELS, same_bits, two_methods
from repo import requires_qemu

BOARD = "mps2-an505"
pytestmark = [requires_qemu, pytest.mark.qemu]


@pytest.fixture(scope="module")
def firmware():
    """The interpreter firmware with every kernel: built once, no model in it."""
    return build_interpreter_firmware(load_board(BOARD))


def _device_outputs(run, method: str, cm, vector: int) -> list[np.ndarray]:
    return [run.output(method, vector, i, NUMPY_DTYPES[t.dtype], t.numel) for i, t in enumerate(cm.graph.outputs)]


@pytest.mark.slow
@pytest.mark.parametrize("quantize", ["none", "int8"])
# small_cnn's programs run on this board in tests/seams/test_seams_matrix.py (fp32, int8 and w4a8)
@pytest.mark.parametrize("name", [m for m in PROGRAM_MODELS if m != "small_cnn"])
def test_program_on_firmware_equals_generated_c(compiled, firmware, name: str, quantize: str) -> None:
    cm = compiled(name, BOARD, quantize)
    image = cm.program_image(bundle_tests=True)
    run = run_program(cm.board, firmware.elf, image.program)
    assert run.passed, run.console[-2000:]
    assert len(run.instructions) == len(cm.spec.test_inputs) and run.instructions[0] > 0
    sim = cm.simulate()  # the generated-C firmware on the same core
    assert sim.passed, sim.console[-2000:]
    host = Program.load(image.program).method("forward")
    for v, x in enumerate(cm.spec.test_inputs[:4]):
        device = _device_outputs(run, "forward", cm, v)
        generated = [to_memory_order(y, t) for y, t in zip(sim.outputs_raw[v], cm.graph.outputs)]
        for got, want in zip(device, generated):
            assert same_bits(got, want.astype(got.dtype))  # identical bits: interpreter vs generated C
        if quantize == "int8":
            for got, want in zip(device, host.run_raw(*cm.encode_inputs(x))):
                assert same_bits(got, want)  # and the host extension (int8: zero differences)


def test_one_firmware_runs_new_programs_without_a_rebuild(compiled, firmware) -> None:
    before = hashlib.sha256(firmware.elf.read_bytes()).hexdigest()
    board = load_board(BOARD)
    assert "small_cnn" not in render_main(board)  # the firmware source names no model
    for name in ("small_cnn", "fc_autoencoder"):
        cm = compiled(name, BOARD, "int8")
        run = run_program(board, firmware.elf, cm.program_image(bundle_tests=True).program)
        assert run.passed and f"PROGRAM {len(cm.program_image(bundle_tests=True).program)} 1" in run.console
    assert build_interpreter_firmware(board).elf == firmware.elf
    assert hashlib.sha256(firmware.elf.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_several_methods_sharing_weights_on_firmware(tmp_path_factory, firmware, quantize: str) -> None:
    methods = two_methods(tmp_path_factory, quantize)
    image = program_from(methods, bundle=True)
    run = run_program(load_board(BOARD), firmware.elf, image.program)
    assert run.passed, run.console[-2000:]
    assert list(run.methods) == ["forward", "encode", "decode"]
    host = Program.load(image.program)
    for m in methods:
        cm = m.model
        assert run.methods[m.name].vector_passed and all(run.methods[m.name].vector_passed.values())
        sim = cm.simulate() if quantize == "none" else None
        for v, x in enumerate(cm.spec.test_inputs):
            device = _device_outputs(run, m.name, cm, v)
            if sim is not None:  # fp32: bit-identical to this method's generated C on the same core
                want = [to_memory_order(y, t) for y, t in zip(sim.outputs_raw[v], cm.graph.outputs)]
            else:  # int8: bit-identical to the host
                want = host.method(m.name).run_raw(*cm.encode_inputs(x))
            for got, w in zip(device, want):
                assert same_bits(got, np.asarray(w).astype(got.dtype)), m.name


def test_external_weights_on_firmware(compiled, firmware) -> None:
    board = load_board(BOARD)
    cm = compiled("resnet8", BOARD, "int8")
    image = cm.program_image(external_weights=True, bundle_tests=True)
    run = run_program(board, firmware.elf, image.program, image.weights)
    assert run.passed, run.console[-2000:]
    inline = run_program(board, firmware.elf, cm.program_image(bundle_tests=True).program)
    assert _device_outputs(run, "forward", cm, 0)[0].tobytes() == _device_outputs(inline, "forward", cm, 0)[0].tobytes()
    foreign = compiled("ds_cnn", BOARD, "int8").program_image(external_weights=True).weights
    refused = run_program(board, firmware.elf, image.program, foreign)
    assert refused.exit_code == 3 and refused.error == "weights mismatch", refused.console


def test_bad_or_missing_program_on_firmware(compiled, firmware) -> None:
    board = load_board(BOARD)
    empty = run_program(board, firmware.elf, bytes(64))
    assert empty.exit_code == 3 and empty.error == "invalid program"
    blob = bytearray(compiled("small_cnn", BOARD, "int8").program_image(bundle_tests=True).program)
    blob[len(blob) // 2] ^= 0x04
    flipped = run_program(board, firmware.elf, bytes(blob))
    assert flipped.exit_code == 3 and flipped.error == "program checksum mismatch"


def test_program_regions_leave_the_firmware_its_flash() -> None:
    board = load_board(BOARD)
    layout = program_layout(board)
    assert layout.firmware_board.flash.end <= layout.program.origin < layout.weights.origin
    assert layout.program.end == layout.weights.origin  # a program with inline weights may run on into it
    assert layout.weights.end == board.flash.end
    assert layout.program.origin % 4096 == 0 and layout.weights.origin % 4096 == 0


def test_interpreter_code_stays_small_at_os_on_cortex_m33() -> None:
    # The core (loader, flatbuffer reader, executor, delegate registry) was under 8 KiB before the
    # load-time check of every kernel parameter and operand alias; that check and the dispatch grow with
    # each kernel id (mcu_program_kernels.c, mcu_program_params.c: 13 KiB at 40 kernels). Both are
    # bounded: the core absolutely, the per-kernel part per kernel id. The core grew past 8 KiB with the
    # streamed prefix (7,525 -> 10,621 B: its table's walk, shared by the loader's check and the run, 1.2
    # KiB; the loader's replay of it, the run's row callback and the operand lookup kept inline the rest).
    from mcu.program import format as fmt

    size = interpreter_code_size(load_board(BOARD), "-Os")
    per_kernel = size.per_file["mcu_program_kernels.c"] + size.per_file["mcu_program_params.c"]
    core = size.total - per_kernel
    kernels = len(fmt.KERNEL_IDS)
    print(f"interpreter code at -Os on Cortex-M33: {size.total} B {size.per_file}; core {core} B, "
          f"{per_kernel / kernels:.0f} B per kernel id ({kernels} ids)")
    assert core < 11 * 1024
    assert per_kernel < 200 * kernels



def test_interpreter_checks_stay_small_at_o2_on_cortex_m33() -> None:
    # Firmware is built at -O2, where GCC copies small static helpers into each caller: the load-time
    # checks are a hundred small functions named by the rows of mcu_kernels.def, so a shared helper
    # inlined into all of them costs kilobytes (287 B per kernel id with prod, mulcap, checked_count and
    # the alias predicates inlined; 209 B with them out of line, at 79 ids).
    from mcu.program import format as fmt

    size = interpreter_code_size(load_board(BOARD), "-O2")
    per_kernel = size.per_file["mcu_program_kernels.c"] + size.per_file["mcu_program_params.c"]
    kernels = len(fmt.KERNEL_IDS)
    print(f"interpreter code at -O2 on Cortex-M33: {size.total} B {size.per_file}; "
          f"{per_kernel / kernels:.0f} B per kernel id ({kernels} ids)")
    assert per_kernel < 225 * kernels

def test_pico2_interpreter_firmware_and_program_uf2(compiled) -> None:
    """The Pico 2 gets the interpreter firmware once (its UF2 stays in the first MiB of flash); a new
    program is a UF2 of just the program region."""
    from mcu.device.uf2 import decode

    board = load_board("pico2")
    layout = program_layout(board)
    fw = build_interpreter_firmware(board)
    assert fw.uf2 is not None and fw.flash_bytes <= layout.firmware_board.flash.length
    blob = compiled("small_cnn", BOARD, "int8").program_image(bundle_tests=True).program
    uf2 = decode(program_uf2(board, blob))
    assert uf2.family == board.uf2_family
    assert min(addr for addr, _ in uf2.chunks()) == layout.program.origin
    assert uf2.read(layout.program.origin, len(blob)) == blob
