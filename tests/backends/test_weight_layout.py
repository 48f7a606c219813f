"""The weight layout follows the board's flash when the build leaves it open: packed int16 (the fastest) while it
fits with room to spare, int8 for the compact kernels otherwise, said in the build's report; and when nothing
fits, the error names the narrowest weights that would.

The boards are the M33's own description with only the flash size changed (256 KiB, 4 MiB and smaller), written
as board files, so the layout is chosen exactly as for a board a user adds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcu import paths
from mcu.device.boards import Board, load_board
from mcu.errors import McuError
from support.compiled import lowered_model


def _board(tmp_path: Path, flash_bytes: int) -> Board:
    name = f"m33-flash-{flash_bytes}"
    text = (paths.boards_dir() / "mps2-an505.toml").read_text()
    text = text.replace('name = "mps2-an505"', f'name = "{name}"')
    text, n = re.subn(r"(\[memory\.flash\][^\[]*?length = )0x[0-9a-fA-F]+", rf"\g<1>{flash_bytes:#x}", text)
    assert n == 1
    (tmp_path / f"{name}.toml").write_text(text)
    board = load_board(name, tmp_path)
    assert board.flash.length == flash_bytes
    return board


def _kernels(cm) -> set[str]:
    return {f for f in cm.library.kernel_sources if "conv2d" in f or "linear" in f}


def _note(cm) -> str:
    return next(text for backend, text in cm.partitions.notes if backend == "optimized")


@pytest.mark.xdist_group("resnet8")  # shares the lowered model with the other ResNet-8 tests
def test_packed_on_a_large_flash_compact_on_a_small_one(tmp_path: Path) -> None:
    lowered = lowered_model("resnet8", "int8")
    # ResNet-8's constants: 81,512 B as int8, 158,872 B packed; packed while within 75 % of the flash.
    big, small = _board(tmp_path, 4 << 20), _board(tmp_path, 128 << 10)
    on_big = lowered.compile(big)
    assert "mcu_conv2d_packed_s8.c" in _kernels(on_big)
    assert re.fullmatch(r"weights packed as int16, the fastest layout: 158872 B of constants packed, 4 % of the "
                        r"board's 4194304 B of flash, .*", _note(on_big))
    on_256k = lowered.compile(_board(tmp_path, 256 << 10))  # 158,872 <= 196,608: packed still fits with room
    assert "mcu_conv2d_packed_s8.c" in _kernels(on_256k)
    on_small = lowered.compile(small)  # 158,872 > 98,304
    assert "mcu_conv2d_compact_s8.c" in _kernels(on_small)
    assert "mcu_conv2d_packed_s8.c" not in _kernels(on_small)
    assert re.fullmatch(r"weights kept int8 for the compact kernels: 158872 B of constants packed, 121 % of the "
                        r"board's 131072 B of flash, over the 75 % .*", _note(on_small))


@pytest.mark.xdist_group("mobilenet_v1")
def test_int8_weights_over_the_flash_name_w4a8(tmp_path: Path) -> None:
    lowered = lowered_model("mobilenet_v1", "int8")
    board = _board(tmp_path, 200 << 10)  # its 240,968 B of int8 constants overflow 200 KiB before any code
    with pytest.raises(McuError, match=r"does not fit m33-flash-204800: its constants need 240968 B of flash .*; "
                                       r"the smallest configuration that fits: --quantize w4a8, about 1\d{5} B "
                                       r"of constants"):
        lowered.compile(board)
    tiny = _board(tmp_path, 64 << 10)
    with pytest.raises(McuError, match=r"; even --quantize w4a8 would need about 1\d{5} B \(\d+ B too many\)"):
        lowered.compile(tiny)


@pytest.mark.xdist_group("resnet8")
def test_a_firmware_over_the_flash_names_the_narrower_weights_that_fit(tmp_path: Path) -> None:
    """The constants fit but code and the harness's vectors do not: the link's overflow names w4a8."""
    cm = lowered_model("resnet8", "int8").compile(_board(tmp_path, 96 << 10))  # 81,512 B of constants fit
    assert "mcu_conv2d_compact_s8.c" in _kernels(cm)
    with pytest.raises(McuError, match=r"firmware does not fit m33-flash-98304: it needs 1\d{5} B of flash, the board "
                                       r"has 98304 B \(\d+ B too many\); the smallest configuration that fits: "
                                       r"--quantize w4a8, about \d+ B"):
        cm.build(tmp_path / "fw")
