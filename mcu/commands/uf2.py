"""Write the UF2 of a linked ELF: ``python -m mcu.commands.uf2 app.elf app.uf2 --family rp2350-arm-s``.

The exported Pico SDK example runs this after linking when the SDK is configured with PICO_NO_PICOTOOL
(the SDK makes its UF2 files with picotool): the same writer as `mcu flash` (mcu.device.uf2), one block
per 256-byte page of the ELF's loadable bytes at their load addresses, and with --abs-block the RP2350-E10
block the SDK's picotool adds for the Pico 2 (the same bytes as `picotool uf2 convert --abs-block`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from mcu.device.uf2 import ABSOLUTE_BLOCK_ADDRESS, FAMILIES, family_id, read_uf2, write_uf2
from mcu.errors import McuError


def _address(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        value = -1
    if not 0 <= value <= 0xFFFFFF00 or value % 256:
        raise McuError(f"--abs-block {text!r} is not a 256-byte aligned 32-bit address")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcu.commands.uf2", description=__doc__.split("\n\n")[0])
    parser.add_argument("elf", type=Path, help="the linked ELF")
    parser.add_argument("uf2", type=Path, help="the UF2 file to write")
    parser.add_argument("--family", required=True,
                        help=f"UF2 family: {', '.join(FAMILIES)} (the SDK's PICO_PLATFORM names) or a number")
    parser.add_argument("--abs-block", nargs="?", const=f"{ABSOLUTE_BLOCK_ADDRESS:#x}", default=None,
                        metavar="ADDRESS",
                        help="RP2350 images: open the file with the RP2350-E10 absolute-family block, as the "
                             "SDK does for boards with PICO_RP2350_A2_SUPPORTED (default address "
                             f"{ABSOLUTE_BLOCK_ADDRESS:#x})")
    args = parser.parse_args(argv)
    try:
        family = family_id(args.family)
        absolute_at = None if args.abs_block is None else _address(args.abs_block)
        uf2 = read_uf2(write_uf2(args.elf, args.uf2, family, absolute_at))
    except McuError as exc:
        print(f"mcu: error: {exc}", file=sys.stderr)
        return exc.exit_code
    first = uf2.blocks[0].address
    last = uf2.blocks[-1].address + len(uf2.blocks[-1].data)
    opening = f", after the RP2350-E10 block at {uf2.ignored[0].address:#010x}" if uf2.ignored else ""
    print(f"wrote {args.uf2} ({len(uf2.blocks)} blocks, {first:#010x}..{last:#010x}, family {family:#x}{opening})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
