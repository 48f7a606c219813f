"""`mcu flash` / `mcu monitor` against a fake Pico 2: a temporary folder playing the BOOTSEL drive
(a helper thread removes its INFO_UF2.TXT once the UF2 lands, as the real board reboots) and a
pseudo-terminal playing the USB-serial adapter (fed with the lines the firmware prints)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_runner import mcu_in_process
from fake_pico import FAIL_LINES, PASS_LINES, FakePico, Pty, make_drive, mcu_process
from mcu.device import flash
from mcu.errors import McuError
from mcu.device.uf2 import FAMILY_RP2350_ARM_S, encode, read_uf2
from repo import EXAMPLES


@pytest.fixture
def small_uf2(tmp_path: Path) -> Path:
    path = tmp_path / "firmware.uf2"
    path.write_bytes(encode([(0x10000000, bytes(range(256)))], FAMILY_RP2350_ARM_S))
    return path


@pytest.fixture
def no_picotool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PATH without picotool, so the drive path is the only way to flash."""
    bin_dir = tmp_path / "empty-bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))


# --- the happy paths ------------------------------------------------------------------------------


def test_flash_copies_waits_and_reads_the_verdict(tmp_path: Path, pty: Pty, small_uf2: Path,
                                                  no_picotool: None) -> None:
    media = tmp_path / "media"
    drive = make_drive(media)
    pico = FakePico(drive, pty, PASS_LINES)
    pico.start()
    seen: list[str] = []
    result = flash.flash_uf2(small_uf2, port=pty.port, search_dirs=[media], timeout_s=10, on_line=seen.append)
    pico.join(5)
    assert result.method == "drive" and result.target == str(drive)
    assert result.exit_code == 0 and result.console is not None
    assert seen == PASS_LINES
    assert result.console.report.passed and result.console.report.cycles == 1234567
    assert result.console.firmware_exit == 0
    assert read_uf2(media / "received.uf2").chunks() == read_uf2(small_uf2).chunks()


def test_a_fail_line_makes_exit_status_1(tmp_path: Path, pty: Pty, small_uf2: Path) -> None:
    drive = make_drive(tmp_path)
    pico = FakePico(drive, pty, FAIL_LINES)
    pico.start()
    result = flash.flash_uf2(small_uf2, drive=drive, port=pty.port, timeout_s=10)
    assert result.exit_code == 1
    assert result.console is not None and result.console.report.passed is False


def test_fault_without_result_is_a_failure(tmp_path: Path, pty: Pty, small_uf2: Path) -> None:
    drive = make_drive(tmp_path)
    FakePico(drive, pty, ["FAULT HardFault exception=3 cfsr=00000000 hfsr=40000000", "EXIT 131"]).start()
    result = flash.flash_uf2(small_uf2, drive=drive, port=pty.port, timeout_s=10)
    assert result.exit_code == 1 and result.console is not None and result.console.firmware_exit == 131


def test_picotool_is_used_when_no_drive_is_mounted(tmp_path: Path, pty: Pty, small_uf2: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "picotool-args.txt"
    fake = bin_dir / "picotool"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {log}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    FakePico(None, pty, PASS_LINES, trigger=log).start()
    result = flash.flash_uf2(small_uf2, port=pty.port, search_dirs=[tmp_path / "nothing-mounted"], timeout_s=10)
    assert result.method == "picotool" and result.exit_code == 0
    assert log.read_text().split() == ["load", "-x", str(small_uf2)]


def test_picotool_failure_says_what_to_do(tmp_path: Path, small_uf2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "picotool"
    fake.write_text("#!/bin/sh\necho 'No accessible RP-series devices in BOOTSEL mode were found.' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, search_dirs=[tmp_path / "none"], timeout_s=5, watch_console=False)
    assert "No accessible RP-series devices" in exc.value.message and "BOOTSEL" in str(exc.value.hint)


# --- the error paths ------------------------------------------------------------------------------


def test_no_drive(tmp_path: Path, pty: Pty, small_uf2: Path, no_picotool: None) -> None:
    media = tmp_path / "media"
    (media / "USBSTICK").mkdir(parents=True)  # a drive, but not a Pico 2
    (media / "USBSTICK" / "INFO_UF2.TXT").write_text("Board-ID: RPI-RP2\n")  # an RP2040 is not an RP2350
    start = time.monotonic()
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, port=pty.port, search_dirs=[media], timeout_s=0.5)
    assert time.monotonic() - start < 5
    assert "no Pico 2 in BOOTSEL mode found after 0.5 s" in exc.value.message
    assert f"{media}/*" in exc.value.message
    assert "hold the BOOTSEL button while plugging" in str(exc.value.hint)


def test_drive_that_is_not_a_bootsel_drive(tmp_path: Path, small_uf2: Path) -> None:
    with pytest.raises(McuError, match="is not a Pico 2 BOOTSEL drive"):
        flash.flash_uf2(small_uf2, drive=tmp_path, timeout_s=1, watch_console=False)


def test_drive_that_never_disappears(tmp_path: Path, pty: Pty, small_uf2: Path) -> None:
    drive = make_drive(tmp_path)
    FakePico(drive, pty, PASS_LINES, disappear=False).start()
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, drive=drive, port=pty.port, timeout_s=0.5)
    assert "still there 0.5 s after the copy" in exc.value.message
    assert (drive / "firmware.uf2").is_file()


def test_no_serial_port(tmp_path: Path, small_uf2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serial.tools import list_ports

    monkeypatch.setattr(list_ports, "comports", lambda *a, **k: [])
    drive = make_drive(tmp_path)
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, drive=drive, timeout_s=1)
    assert "no USB serial port found" in exc.value.message
    assert "--port" in str(exc.value.hint) and "GP0" in str(exc.value.hint)
    # Checked before flashing: the board was left alone.
    assert not (drive / "firmware.uf2").exists()


def test_port_that_cannot_be_opened(tmp_path: Path, small_uf2: Path) -> None:
    with pytest.raises(McuError, match="cannot open serial port /nonexistent/tty"):
        flash.flash_uf2(small_uf2, drive=make_drive(tmp_path), port="/nonexistent/tty", timeout_s=1)


def test_port_that_goes_silent(tmp_path: Path, pty: Pty, small_uf2: Path) -> None:
    drive = make_drive(tmp_path)
    FakePico(drive, pty, PASS_LINES[:2]).start()
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, drive=drive, port=pty.port, timeout_s=10, silence_s=0.5)
    assert f"{pty.port} went silent after 0.5 s without a RESULT line" in exc.value.message
    assert "'VECTOR 0 PASS'" in exc.value.message


def test_port_that_never_speaks(tmp_path: Path, pty: Pty, small_uf2: Path) -> None:
    drive = make_drive(tmp_path)
    FakePico(drive, pty, []).start()
    with pytest.raises(McuError) as exc:
        flash.flash_uf2(small_uf2, drive=drive, port=pty.port, timeout_s=0.5)
    assert f"nothing received on {pty.port} in 0.5 s" in exc.value.message
    assert "GP0" in str(exc.value.hint)


# --- finding things -------------------------------------------------------------------------------


def test_mount_conventions() -> None:
    linux = flash.bootsel_search_dirs("Linux", "alice")
    assert linux[:2] == [Path("/media/alice"), Path("/run/media/alice")] and Path("/mnt") in linux
    assert flash.bootsel_search_dirs("Darwin") == [Path("/Volumes")]
    letters = flash.candidate_drives(None, system="Windows")
    assert len(letters) == 26 and str(letters[4]).startswith("E:")


def test_debug_probe_is_preferred(monkeypatch: pytest.MonkeyPatch) -> None:
    from serial.tools import list_ports

    @dataclass
    class Port:
        device: str
        vid: int | None

    monkeypatch.setattr(list_ports, "comports", lambda *a, **k: [
        Port("/dev/ttyS0", None), Port("/dev/ttyUSB0", 0x0403), Port("/dev/ttyACM0", 0x2E8A)])
    assert flash.pick_serial_port(None) == "/dev/ttyACM0"
    assert flash.pick_serial_port("/dev/ttyX") == "/dev/ttyX"


# --- the command line -----------------------------------------------------------------------------



@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")
def test_mcu_flash_end_to_end(tmp_path: Path, pty: Pty) -> None:
    media = tmp_path / "media"
    drive = make_drive(media)
    pico = FakePico(drive, pty, PASS_LINES, timeout_s=600)
    pico.start()
    proc = mcu_process("flash", "--board", "pico2", "--quantize", "none", "--drive", str(drive), "--port", pty.port,
                "--timeout", "20", "-o", str(tmp_path / "out"), str(EXAMPLES / "small_cnn.py"))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "RESULT PASS 0/1" in out and "EXIT 0" in out
    assert "cycles per inference: 1234567 (8.23 ms at 150 MHz)" in out
    assert out.strip().splitlines()[-1].startswith("PASS: 1 bundled test vectors")
    # The drive received the UF2 the build wrote.
    assert (media / "received.uf2").read_bytes() == (tmp_path / "out" / "firmware.uf2").read_bytes()


def test_mcu_monitor_reports_fail(pty: Pty) -> None:
    proc = mcu_process("monitor", "--port", pty.port, "--timeout", "20")
    pty.wait_until_opened()
    pty.send(FAIL_LINES)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "RESULT FAIL 1/1" in out and out.strip().splitlines()[-1].startswith("FAIL: 1 bundled test vectors")


def test_mcu_flash_refuses_simulated_boards() -> None:
    proc = mcu_in_process("flash", "--board", "mps2-an505", str(EXAMPLES / "small_cnn.py"))
    assert proc.returncode == 2
    assert "mcu: error: board 'mps2-an505' is not flashed over USB" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("sub", ["flash", "monitor"])
def test_help(sub: str) -> None:
    proc = mcu_in_process(sub, "--help")
    out = proc.stdout
    assert proc.returncode == 0 and "usage: mcu" in out and "--port" in out and "--timeout" in out


def test_mcu_run_on_pico2_points_to_flash() -> None:
    proc = mcu_in_process("run", "--board", "pico2", str(EXAMPLES / "small_cnn.py"))
    err = proc.stderr
    assert proc.returncode == 2
    assert "board 'pico2' is real hardware with no simulator" in err and "mcu flash --board pico2" in err
