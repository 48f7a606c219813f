"""--weights-in fast: constant tensors in the fastest memory with room (mcu/device/placement.py).

The linker map and the ELF say where the arrays went (the U575's SRAM, copied at boot; the AN547's ITCM,
loaded with the image); the same model prints the same outputs in QEMU wherever its weights are; what does
not fit stays in flash, and a program file that cannot be copied beside its arena is refused in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mcu.api import CompiledModel
from mcu.device.boards import load_board
from mcu.device.elf import read_elf
from mcu.device.placement import fast_regions, weights_wait
from mcu.errors import DoesNotFit, McuError
from mcu.plan.weights import by_priority, reads_per_inference
from mcu.program.run_model import fast_program_bytes
from repo import requires_qemu

# The tests that compile run in the xdist worker that has small_cnn lowered already (tests/conftest.py).
GROUP_BY_EXAMPLE = True
EXAMPLE = pytest.mark.parametrize("example", ["small_cnn"])


def _fast(cm: CompiledModel, **changes) -> CompiledModel:
    # the fixture's models are shared between tests: change a copy
    return dataclasses.replace(cm, weights_in="fast", **changes)


def _weight_addresses(cm: CompiledModel, elf_path: Path) -> dict[str, int]:
    elf = read_elf(elf_path)
    symbols = {c.symbol for c in cm.library.view.constants}
    return {s.name: s.value for s in elf.symbols if s.name in symbols and s.size}


def test_fast_regions_are_the_faster_memories_fastest_first() -> None:
    assert [w.region.name for w in fast_regions(load_board("mps2-an505-u575"))] == ["ram"]
    assert [w.region.name for w in fast_regions(load_board("mps2-an386-l4r5"))] == ["ram"]
    # the ITCM (code memory, no copy) before the DTCM at the same zero wait states, then the 1-WS SRAM
    an547 = fast_regions(load_board("mps3-an547"))
    assert [(w.region.name, w.copied) for w in an547] == [("flash", False), ("ram", True), ("sram", True)]
    assert fast_regions(load_board("mps2-an505")) == []  # its flash has no wait states: nothing is faster


def test_weights_wait_by_board_and_placement() -> None:
    """The kernels' layouts follow where the weights sit: flash with wait states (behind a cache or not) until
    --weights-in fast moves them to a faster memory; a zero-wait board's never wait."""
    for board in ("mps2-an505-u575", "mps2-an386-l4r5"):
        assert weights_wait(load_board(board), "flash") and not weights_wait(load_board(board), "fast")
    for board in ("mps2-an505", "mps2-an386"):
        assert not weights_wait(load_board(board), "flash") and not weights_wait(load_board(board), "fast")
    assert weights_wait(load_board("mps3-an547"), "flash") and not weights_wait(load_board("mps3-an547"), "fast")


def test_board_default_is_flash_and_validated(tmp_path: Path) -> None:
    assert load_board("mps2-an505-u575").weights_in == "flash"
    text = load_board("mps2-an505-u575").path.read_text()
    (tmp_path / "mps2-an505-u575.toml").write_text('weights_in = "sram"\n' + text)
    with pytest.raises(McuError, match="weights_in"):
        load_board("mps2-an505-u575", tmp_path)


def test_command_line_option() -> None:
    from mcu.commands.cli import parse_args
    from mcu.commands.types import UsageError

    for command in ("build", "run", "export", "profile"):
        extra = ["-o", "out"] if command == "export" else []
        assert parse_args([command, "m.py", "-b", "mps3-an547", *extra, "--weights-in", "fast"]).weights_in == "fast"
        assert parse_args([command, "m.py", "-b", "mps3-an547", *extra]).weights_in is None  # the board's default
    with pytest.raises((UsageError, SystemExit)):
        parse_args(["run", "m.py", "-b", "mps3-an547", "--weights-in", "sram"])


@pytest.mark.parametrize("board", ["mps2-an505-u575", "mps3-an547"])
@EXAMPLE
def test_most_read_bytes_first(compiled, board: str, example: str) -> None:
    """A convolution's filter is read once per output pixel (small_cnn: 28 x 28, then 14 x 14), a linear layer's
    once; the packed weight streams of the M33 sit in the ops' attributes and count the same."""
    cm = compiled(example, board, "int8")
    constants = [(c.name, c.symbol) for c in cm.library.view.constants]
    reads = reads_per_inference(cm.graph)
    assert sorted({reads[name] for name, _ in constants}) == [1, 14 * 14, 28 * 28]
    order = by_priority(cm.graph, list(reversed(constants)))
    assert [reads[dict((s, n) for n, s in constants)[s]] for s in order] == \
        sorted((reads[n] for n, _ in constants), reverse=True)


@EXAMPLE
def test_api_keyword(example: str) -> None:
    from compiled import lowered_model

    lowered = lowered_model(example, "int8")
    assert lowered.compile("mps2-an505-u575", weights_in="fast").weights_placement == "fast"
    with pytest.raises(McuError, match="weights_in must be one of flash, fast"):
        lowered.compile("mps2-an505-u575", weights_in="sram")


@pytest.mark.qemu
@EXAMPLE
def test_u575_weights_in_sram_after_a_copy(compiled, example: str) -> None:
    cm = compiled(example, "mps2-an505-u575", "int8")
    board = cm.board
    flash, fast = cm.build(), _fast(cm).build()
    before, after = _weight_addresses(cm, flash.elf), _weight_addresses(cm, fast.elf)
    assert before and all(board.flash.contains(a) for a in before.values())
    assert after.keys() == before.keys() and all(board.ram.contains(a) for a in after.values())
    mapped = fast.elf.with_suffix(".map").read_text()
    assert ".mcu_weights_ram" in mapped and "load address" in mapped.split(".mcu_weights_ram", 1)[1][:200]
    # RAM counts them (report, breakdown); the load image stays in flash
    weights = fast.weights_placed["ram"]
    assert weights >= sum(c.numel for c in cm.library.view.constants)  # at least a byte each
    # with the model code's read-only data (each op's parameters), which moves first
    moved = fast.sizes.ram["weights"] + fast.sizes.ram["model code"]
    assert fast.sizes.ram["model code"] > 0 and flash.sizes.ram["model code"] == 0
    n = len(cm.library.view.constants)
    assert fast.ram_bytes >= flash.ram_bytes + weights and 0 <= weights - moved <= 16 * (n + 1)
    assert fast.flash_bytes >= flash.flash_bytes


@pytest.mark.qemu
@EXAMPLE
def test_what_does_not_fit_stays_in_flash(compiled, example: str) -> None:
    cm = compiled(example, "mps2-an505-u575", "int8")
    full = _fast(cm).build()
    weights = full.weights_placed["ram"]
    # RAM for everything else and about half the weights: the largest one cannot fit any more
    ram = dataclasses.replace(cm.board.ram, length=full.ram_bytes - weights + weights // 2)
    small = _fast(cm, board=dataclasses.replace(cm.board, ram=ram)).build()
    placed = small.weights_placed["ram"]
    assert 0 < placed <= weights // 2
    where = _weight_addresses(cm, small.elf)
    assert any(cm.board.flash.contains(a) for a in where.values()) and any(ram.contains(a) for a in where.values())


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505-u575", "mps3-an547"])
@EXAMPLE
def test_outputs_identical_wherever_the_weights_are(compiled, board: str, example: str) -> None:
    cm = compiled(example, board, "int8")
    slow, quick = cm.simulate(), _fast(cm).simulate()
    assert slow.passed and quick.passed
    assert all((a == b).all() for x, y in zip(slow.outputs_raw, quick.outputs_raw) for a, b in zip(x, y))
    assert quick.estimated_cycles < slow.estimated_cycles  # no flash (QSPI) wait states on the weights
    if board == "mps3-an547":  # the ITCM took them, no copy
        fw = _fast(cm).build()
        assert fw.weights_placed["flash"] > 0 and not fw.weights_placed.get("ram")


@EXAMPLE
def test_program_copy_that_does_not_fit_is_refused_in_one_line(compiled, example: str) -> None:
    cm = compiled(example, "mps2-an505-u575", "int8")
    program = cm.program_image(bundle_tests=True).program
    assert fast_program_bytes(_fast(cm), program) == -(-len(program) // 16) * 16
    assert fast_program_bytes(cm, program) == 0  # flash by default
    # a RAM whose interpreter arena holds the model's arena but not the program beside it
    from mcu.program.device import program_layout

    board = cm.board
    for length in range(64 << 10, 1 << 20, 4 << 10):
        tight = dataclasses.replace(board, ram=dataclasses.replace(board.ram, length=length))
        room = program_layout(tight).arena_bytes
        if cm.memory.arena_size <= room < cm.memory.arena_size + len(program):
            break
    else:
        pytest.fail("no RAM size between the arena and the arena plus the program")
    with pytest.raises(DoesNotFit) as exc:
        fast_program_bytes(_fast(cm, board=tight), program)
    assert exc.value.exit_code == 2 and "\n" not in exc.value.message
    assert f"the program file ({len(program)} B) does not fit" in exc.value.message
