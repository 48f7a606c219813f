"""Put a UF2 on a Raspberry Pi Pico 2 and read what the firmware prints.

The flow of ``mcu flash``:

1. Open the serial console first (``--port``, or the first USB serial device:
   a Raspberry Pi Debug Probe, a USB-serial adapter on GP0/GP1, a CDC port),
   so nothing the firmware prints right after reboot is lost.
2. Find the board in BOOTSEL mode: a mounted folder whose ``INFO_UF2.TXT``
   names RP2350 (Linux ``/media/$USER/*``, ``/run/media/$USER/*``, ``/mnt/*``;
   macOS ``/Volumes/*``; Windows drive letters), or ``--drive PATH``. If no
   drive is mounted and ``picotool`` is on PATH, ``picotool load -x`` loads
   and starts the image instead.
3. Copy the UF2 to the drive and wait for the drive to go away (the ROM
   flashes the image and reboots into it).
4. Print every console line and stop at the harness verdict (``RESULT``),
   a fault, or the ``EXIT`` line; the exit status is the firmware's verdict.

Every wait has a timeout and ends in an :class:`McuError` that says what to
do. Nothing here keeps state between calls.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import string
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcu.device.console import HarnessReport, parse_harness
from mcu.errors import McuError

INFO_FILE = "INFO_UF2.TXT"
CHIP_NAME = "RP2350"
# What each boot ROM writes as Board-ID in INFO_UF2.TXT, by the UF2 family the board's image uses.
CHIP_BY_FAMILY = {0xE48BFF56: "RPI-RP2", 0xE48BFF57: "RP2350", 0xE48BFF59: "RP2350", 0xE48BFF5A: "RP2350",
                  0xE48BFF5B: "RP2350"}
BAUD = 115200


def _board_name(chip: str) -> str:
    return "Pico" if chip == "RPI-RP2" else "Pico 2"


DEFAULT_TIMEOUT_S = 60.0
DEFAULT_SILENCE_S = 10.0
POLL_S = 0.1
# After the verdict line, wait this long for the EXIT line the pico2 port
# prints last (ports/cortex-m/exit.c).
EXIT_GRACE_S = 1.0


def bootsel_hint(chip: str = CHIP_NAME) -> str:
    return (f"hold the BOOTSEL button while plugging the {_board_name(chip)} into USB, then run the command again "
            "(or pass --drive PATH to its mounted drive)")


WIRING_HINT = ("wire GP0 (TX) to the adapter's RX, GP1 (RX) to its TX and GND to GND, 115200 baud; "
               "or use a Raspberry Pi Debug Probe's UART port")
# USB vendor IDs of the serial devices a Pico 2 user is likely to have, most
# likely first: Raspberry Pi (Debug Probe, Pico as USB-serial), FTDI, Silicon
# Labs CP210x, WCH CH340, Prolific PL2303.
PREFERRED_VIDS = (0x2E8A, 0x0403, 0x10C4, 0x1A86, 0x067B)

_EXIT = re.compile(r"^EXIT (-?\d+)\s*$")

LineSink = Callable[[str], None]


@dataclass(frozen=True)
class ConsoleResult:
    exit_code: int  # 0 when the firmware printed RESULT PASS, else 1
    console: str  # every line received, "\n"-separated
    report: HarnessReport
    firmware_exit: int | None  # the status on the EXIT line, when the firmware printed one
    port: str


@dataclass(frozen=True)
class FlashResult:
    method: str  # "drive" or "picotool"
    target: str  # the drive path or the picotool command
    console: ConsoleResult | None = None
    waited_s: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return self.console.exit_code if self.console is not None else 0


# --- finding the BOOTSEL drive --------------------------------------------------------------------


def bootsel_search_dirs(system: str | None = None, user: str | None = None) -> list[Path]:
    """Folders under which removable drives get mounted on this OS (their children are candidates)."""
    system = system or platform.system()
    if system == "Darwin":
        return [Path("/Volumes")]
    if system == "Windows":
        return []  # drive letters, see candidate_drives
    user = user or os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    roots = [Path("/media") / user, Path("/run/media") / user] if user else []
    return [*roots, Path("/media"), Path("/mnt")]


def candidate_drives(search_dirs: Sequence[Path] | None = None, system: str | None = None) -> list[Path]:
    """Every mounted folder that could be a BOOTSEL drive."""
    system = system or platform.system()
    if search_dirs is None and system == "Windows":
        return [Path(f"{letter}:\\") for letter in string.ascii_uppercase]
    found: list[Path] = []
    for root in search_dirs if search_dirs is not None else bootsel_search_dirs(system):
        try:
            children = sorted(p for p in Path(root).iterdir() if p.is_dir())
        except OSError:
            continue  # the folder does not exist or is not readable here
        found += [root, *children] if (Path(root) / INFO_FILE).is_file() else children
    return found


def chip_for_family(family: int | None) -> str:
    """The Board-ID of the BOOTSEL drive that takes UF2 files of ``family`` (RP2350 by default)."""
    return CHIP_BY_FAMILY.get(family or 0, CHIP_NAME)


def is_bootsel_drive(path: Path, chip: str = CHIP_NAME) -> bool:
    """A folder whose INFO_UF2.TXT names the chip (the RP2350 ROM writes ``Board-ID: RP2350``, the RP2040's
    ``Board-ID: RPI-RP2``)."""
    try:
        return chip in (Path(path) / INFO_FILE).read_text(errors="replace")
    except OSError:
        return False


def find_bootsel_drive(search_dirs: Sequence[Path] | None = None, chip: str = CHIP_NAME) -> Path | None:
    return next((p for p in candidate_drives(search_dirs) if is_bootsel_drive(p, chip)), None)


def _tried(search_dirs: Sequence[Path] | None) -> str:
    if search_dirs is None and platform.system() == "Windows":
        return "drive letters A: to Z:"
    dirs = search_dirs if search_dirs is not None else bootsel_search_dirs()
    return ", ".join(f"{d}/*" for d in dirs)


def wait_for_bootsel_drive(search_dirs: Sequence[Path] | None, timeout_s: float,
                           on_status: LineSink | None = None, chip: str = CHIP_NAME) -> Path:
    deadline = time.monotonic() + timeout_s
    announced = False
    while True:
        drive = find_bootsel_drive(search_dirs, chip)
        if drive is not None:
            return drive
        if time.monotonic() >= deadline:
            raise McuError(f"no {_board_name(chip)} in BOOTSEL mode found after {timeout_s:g} s "
                           f"(looked for {INFO_FILE} naming {chip} in {_tried(search_dirs)})",
                           hint=bootsel_hint(chip))
        if not announced and on_status is not None:
            on_status(f"waiting up to {timeout_s:g} s for a {_board_name(chip)} in BOOTSEL mode: {bootsel_hint(chip)}")
            announced = True
        time.sleep(POLL_S)


def copy_to_drive(uf2: Path, drive: Path) -> Path:
    """Copy the UF2 onto the drive. The board reboots as soon as the last block lands,
    so an error while closing the file on a drive that has just vanished is success."""
    target = Path(drive) / Path(uf2).name
    try:
        shutil.copyfile(uf2, target)
    except OSError as exc:
        if (Path(drive) / INFO_FILE).exists():
            raise McuError(f"copying {uf2} to {drive} failed: {exc.strerror or exc}",
                           hint="is the drive mounted read-only or full?") from exc
    return target


def wait_until_gone(drive: Path, timeout_s: float, chip: str = CHIP_NAME) -> float:
    """Wait for the drive to disappear (the ROM reboots into the new image); returns the seconds waited."""
    start = time.monotonic()
    while (Path(drive) / INFO_FILE).exists():
        if time.monotonic() - start >= timeout_s:
            raise McuError(
                f"the BOOTSEL drive {drive} is still there {timeout_s:g} s after the copy: the board did not "
                "accept the UF2",
                hint=f"check that the board is a {_board_name(chip)} ({'RP2040' if chip == 'RPI-RP2' else 'RP2350'}) "
                     "and that the drive is not a different board; unplug it, hold BOOTSEL, plug it in and try again")
        time.sleep(POLL_S)
    return time.monotonic() - start


def picotool_load(uf2: Path, timeout_s: float, picotool: str = "picotool", chip: str = CHIP_NAME) -> str:
    """``picotool load -x``: write the image over PICOBOOT and start it."""
    cmd = [picotool, "load", "-x", str(uf2)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise McuError(f"`{' '.join(cmd)}` did not finish in {timeout_s:g} s", hint=bootsel_hint(chip)) from exc
    if proc.returncode != 0:
        output = " ".join((proc.stderr + proc.stdout).split())
        raise McuError(f"`{' '.join(cmd)}` failed: {output or f'exit status {proc.returncode}'}",
                       hint=bootsel_hint(chip))
    return " ".join(cmd)


# --- the serial console ---------------------------------------------------------------------------


def serial_candidates() -> list[Any]:
    """USB serial ports (pyserial ListPortInfo), the likeliest Pico 2 console first."""
    # lazy: pyserial is optional; only flashing over a serial port needs it
    from serial.tools import list_ports

    ports = [p for p in list_ports.comports() if getattr(p, "vid", None) is not None]

    def rank(p: Any) -> tuple[int, str]:
        vid = getattr(p, "vid", None)
        return (PREFERRED_VIDS.index(vid) if vid in PREFERRED_VIDS else len(PREFERRED_VIDS), p.device)

    return sorted(ports, key=rank)


def pick_serial_port(port: str | None, chip: str = CHIP_NAME) -> str:
    if port:
        return port
    candidates = serial_candidates()
    if candidates:
        return str(candidates[0].device)
    # lazy: pyserial is optional; only flashing over a serial port needs it
    from serial.tools import list_ports

    seen = ", ".join(sorted(p.device for p in list_ports.comports())) or "none"
    raise McuError(f"no USB serial port found for the {_board_name(chip)}'s console (serial ports seen: {seen})",
                   hint=f"pass --port, or connect a USB-serial adapter: {WIRING_HINT}")


def open_serial(port: str, baud: int = BAUD) -> Any:
    # lazy: pyserial is optional; only flashing over a serial port needs it
    import serial

    try:
        # A short read timeout: the reader polls so it can enforce its own deadlines.
        return serial.Serial(port, baudrate=baud, timeout=POLL_S)
    except (serial.SerialException, OSError) as exc:
        raise McuError(f"cannot open serial port {port}: {exc}",
                       hint="check the port name (`mcu monitor --help`) and that no other program "
                            "(minicom, screen, a serial monitor) holds it; on Linux add yourself to the "
                            "'dialout' group") from exc


def read_console(ser: Any, port: str, timeout_s: float, silence_s: float,
                 on_line: LineSink | None = None) -> ConsoleResult:
    """Read lines until the verdict (RESULT or FAULT, then the EXIT line if one follows) or a timeout."""
    # lazy: pyserial is optional; only flashing over a serial port needs it
    import serial

    start = last_data = time.monotonic()
    buffer = b""
    lines: list[str] = []
    verdict_at: float | None = None
    firmware_exit: int | None = None

    def finish() -> ConsoleResult:
        report = parse_harness("\n".join(lines))
        code = 0 if report.passed else 1
        return ConsoleResult(exit_code=code, console="\n".join(lines), report=report,
                             firmware_exit=firmware_exit, port=port)

    while True:
        now = time.monotonic()
        if verdict_at is not None and now - verdict_at >= EXIT_GRACE_S:
            return finish()
        if verdict_at is None:
            if not lines and not buffer and now - start >= timeout_s:
                raise McuError(f"nothing received on {port} in {timeout_s:g} s",
                               hint=f"is the firmware running and the adapter wired? {WIRING_HINT}")
            if now - start >= timeout_s:
                raise McuError(f"no RESULT line on {port} after {timeout_s:g} s; last line: "
                               f"{lines[-1] if lines else buffer.decode('utf-8', 'replace')!r}",
                               hint="raise --timeout if the model is slow")
            if (lines or buffer) and now - last_data >= silence_s:
                raise McuError(f"{port} went silent after {silence_s:g} s without a RESULT line; last line: "
                               f"{lines[-1] if lines else buffer.decode('utf-8', 'replace')!r}",
                               hint="the firmware may have hung or reset; press reset or reflash and run "
                                    "`mcu monitor` to watch it again")
        try:
            chunk = ser.read(max(1, getattr(ser, "in_waiting", 0) or 0))
        except (serial.SerialException, OSError) as exc:
            if lines and verdict_at is not None:
                return finish()
            raise McuError(f"serial port {port} failed while reading: {exc}",
                           hint="was the adapter unplugged?") from exc
        if not chunk:
            continue
        last_data = time.monotonic()
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            lines.append(line)
            if on_line is not None:
                on_line(line)
            if m := _EXIT.match(line):
                firmware_exit = int(m.group(1))
                return finish()
            if verdict_at is None and (line.startswith("RESULT ") or line.startswith("FAULT ")):
                verdict_at = time.monotonic()


def monitor(port: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S, silence_s: float | None = None,
            on_line: LineSink | None = None) -> ConsoleResult:
    """Read a board that is already running (``mcu monitor``)."""
    device = pick_serial_port(port)
    ser = open_serial(device)
    try:
        return read_console(ser, device, timeout_s, _silence(silence_s, timeout_s), on_line)
    finally:
        ser.close()


def _silence(silence_s: float | None, timeout_s: float) -> float:
    return silence_s if silence_s is not None else min(DEFAULT_SILENCE_S, timeout_s)


# --- the whole flow -------------------------------------------------------------------------------


def flash_uf2(uf2: Path, *, drive: Path | None = None, port: str | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S, silence_s: float | None = None,
              search_dirs: Sequence[Path] | None = None, watch_console: bool = True,
              on_line: LineSink | None = None, on_status: LineSink | None = None,
              chip: str = CHIP_NAME) -> FlashResult:
    """Flash ``uf2`` to a Pico 2 (or, with ``chip="RPI-RP2"``, a Pico) in BOOTSEL mode and (by default) read
    its console to the verdict."""
    uf2 = Path(uf2)
    if not uf2.is_file():
        raise McuError(f"UF2 file {uf2} does not exist")
    ser = None
    device = ""
    if watch_console:
        device = pick_serial_port(port, chip)
        ser = open_serial(device)
    try:
        waited: dict[str, float] = {}
        if drive is not None:
            if not is_bootsel_drive(drive, chip):
                raise McuError(f"{drive} is not a {_board_name(chip)} BOOTSEL drive (no {INFO_FILE} naming {chip})",
                               hint=bootsel_hint(chip))
            target = Path(drive)
        else:
            target_or_none = find_bootsel_drive(search_dirs, chip)
            picotool = shutil.which("picotool")
            if target_or_none is None and picotool is not None:
                if on_status:
                    on_status(f"no BOOTSEL drive mounted; loading {uf2.name} with picotool")
                command = picotool_load(uf2, timeout_s, picotool, chip)
                console = read_console(ser, device, timeout_s, _silence(silence_s, timeout_s), on_line) \
                    if ser is not None else None
                return FlashResult(method="picotool", target=command, console=console, waited_s=waited)
            target = target_or_none or wait_for_bootsel_drive(search_dirs, timeout_s, on_status, chip)
        if on_status:
            on_status(f"copying {uf2.name} to {target}")
        copy_to_drive(uf2, target)
        waited["drive_gone"] = wait_until_gone(target, timeout_s, chip)
        console = read_console(ser, device, timeout_s, _silence(silence_s, timeout_s), on_line) \
            if ser is not None else None
        return FlashResult(method="drive", target=str(target), console=console, waited_s=waited)
    finally:
        if ser is not None:
            ser.close()
