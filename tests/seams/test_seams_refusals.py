"""What a board cannot take is refused by name before code is generated or built: weights beyond its
read-only memory, a program file the interpreter firmware cannot run (a larger arena, a larger program)."""

from __future__ import annotations

import dataclasses

import pytest

from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.pipeline import check_constants_fit


def test_weights_beyond_the_flash_are_refused_before_generating(compiled) -> None:
    cm = compiled("small_cnn", "mps2-an505", "int8")
    board = load_board("mps2-an505")
    check_constants_fit(board, cm.graph)
    weights = sum(t.nbytes for t in cm.graph.constants())
    small = dataclasses.replace(board, flash=dataclasses.replace(board.flash, length=weights - 1))
    with pytest.raises(McuError, match=rf"does not fit mps2-an505: its constants need {weights} B of flash but the "
                                       rf"board has {weights - 1} B \(1 B too many, before any code; the largest is \w+"):
        check_constants_fit(small, cm.graph)


def test_program_runs_refuse_what_the_interpreter_firmware_cannot_hold(compiled, monkeypatch) -> None:
    import mcu.program.run_model as run_model

    cm = compiled("small_cnn", "mps2-an505", "int8")
    image = cm.program_image(bundle_tests=True)
    run_model.check_interpreter_fits(cm, image.program, image.weights)
    layout = run_model.program_layout(cm.board)
    tight = dataclasses.replace(layout, arena_bytes=cm.memory.arena_size - 16)
    monkeypatch.setattr(run_model, "program_layout", lambda board: tight)
    with pytest.raises(McuError, match=r"arena \(\d+ B\) is larger than the \d+ B arena of the interpreter firmware "
                                       r"on mps2-an505"):
        run_model.check_interpreter_fits(cm, image.program, image.weights)
    # A program with inline weights may run on into the weights region that follows; with a weights file
    # it keeps to its own region.
    monkeypatch.setattr(run_model, "program_layout", lambda board: layout)
    run_model.check_interpreter_fits(cm, bytes(layout.program.length + 1), None)
    with pytest.raises(McuError, match=r"program file .* does not fit the \d+ B program and weights regions"):
        run_model.check_interpreter_fits(cm, bytes(layout.program.length + layout.weights.length + 1), None)
    with pytest.raises(McuError, match=r"program file .* does not fit the \d+ B program region"):
        run_model.check_interpreter_fits(cm, bytes(layout.program.length + 1), image.weights or b"w")
    on_host = dataclasses.replace(cm, board=load_board("host"))
    with pytest.raises(McuError, match="board 'host' has none"):
        run_model.check_interpreter_fits(on_host, image.program, image.weights)
