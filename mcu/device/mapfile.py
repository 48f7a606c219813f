"""Flash and RAM of a firmware, broken down by what put the bytes there, from the GNU ld map file.

Each input section the linker placed is attributed to a category by the
object file it came from (runtime, kernels, model code, weights, the test
harness, the platform port, the C library); the arena and stack sections are
their own categories. Whether an output section occupies flash, RAM or both
comes from the ELF's section headers (a writable section with contents is
stored in flash and copied to RAM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from mcu.device.elf import read_elf

SHF_WRITE = 0x1
SHT_NOBITS = 8

CATEGORIES = ("runtime", "kernels", "model code", "weights", "arenas", "stack", "test harness", "platform",
              "libc", "other")

_INPUT = re.compile(r"^ (\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")
_INPUT_NAME = re.compile(r"^ (\S+)$")
_INPUT_REST = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")
_OUTPUT = re.compile(r"^(\.\S+)")


@dataclass
class SizeReport:
    flash: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    ram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))

    @property
    def flash_total(self) -> int:
        return sum(self.flash.values())

    @property
    def ram_total(self) -> int:
        return sum(self.ram.values())

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {"flash": dict(self.flash), "ram": dict(self.ram)}

    def table(self) -> str:
        rows = [f"{'':14} {'flash':>9} {'RAM':>9}"]
        for cat in CATEGORIES:
            if self.flash[cat] or self.ram[cat]:
                rows.append(f"{cat:14} {self.flash[cat]:>9} {self.ram[cat]:>9}")
        rows.append(f"{'total':14} {self.flash_total:>9} {self.ram_total:>9}")
        return "\n".join(rows)


def _category(output_section: str, origin: str, prefix: str, kernel_stems: set[str]) -> str:
    if output_section.startswith(".mcu_arena"):
        return "arenas"
    if output_section.startswith(".stack") or output_section.startswith(".heap"):
        return "stack"
    name = Path(origin.split("(")[0]).name
    stem = re.sub(r"^\d+-", "", name.removesuffix(".o"))
    if name.endswith(".a") or ".a(" in origin or "lib" in origin and origin.endswith(")"):
        return "libc"
    if stem == f"{prefix}_model":
        return "model code"
    if stem == f"{prefix}_weights":
        return "weights"
    if stem == "main":
        return "test harness"
    if stem in kernel_stems:
        return "kernels"
    if stem.startswith("mcu_"):
        return "runtime"
    if name.endswith(".o"):
        return "platform"
    return "other"


def _placed(map_path: Path, sections: set[str]) -> Iterator[tuple[str, str, int]]:
    """(output section, origin, bytes) of every input section the linker placed in one of ``sections``."""
    text = Path(map_path).read_text(errors="replace")
    body = text.split("Linker script and memory map", 1)[-1]
    current: str | None = None
    pending: str | None = None
    for line in body.splitlines():
        if m := _OUTPUT.match(line):
            current = m.group(1)
            pending = None
            continue
        if current is None or current not in sections:
            continue
        size, origin = None, None
        if m := _INPUT.match(line):
            size, origin = int(m.group(3), 16), m.group(4)
        elif pending is not None and (m := _INPUT_REST.match(line)):
            size, origin = int(m.group(2), 16), m.group(3)
        elif m := _INPUT_NAME.match(line):
            pending = m.group(1)
            continue
        pending = None
        if not size or origin is None or origin.startswith("0x"):
            continue
        yield current, origin, size


def object_flash(map_path: Path, elf_path: Path) -> dict[str, int]:
    """Flash bytes the linker kept of each object file, by its source's stem (``mcu_conv2d_s4``)."""
    elf = read_elf(elf_path)
    stored = {s.name for s in elf.sections if s.alloc and s.type != SHT_NOBITS}
    out: dict[str, int] = {}
    for _section, origin, size in _placed(map_path, stored):
        name = Path(origin.split("(")[0]).name
        if name.endswith(".o"):
            stem = re.sub(r"^\d+-", "", name.removesuffix(".o"))
            out[stem] = out.get(stem, 0) + size
    return out


def object_section_bytes(map_path: Path, output_section: str, stem: str) -> int:
    """Bytes of ``output_section`` that came from the object file of source ``stem`` (``ds_cnn_model``)."""
    total = 0
    for _section, origin, size in _placed(map_path, {output_section}):
        name = Path(origin.split("(")[0]).name
        if name.endswith(".o") and re.sub(r"^\d+-", "", name.removesuffix(".o")) == stem:
            total += size
    return total


def size_report(map_path: Path, elf_path: Path, prefix: str, kernel_sources: list[str],
                flash_bytes: int | None = None, ram_bytes: int | None = None,
                ram_regions: Sequence[tuple[int, int]] = ()) -> SizeReport:
    """The breakdown; given the firmware's totals, gaps between sections count as "other" so columns add up.
    ``ram_regions``: [start, end) of the board's RAMs, where a read-only section that runs from RAM (constant
    tensors copied at boot, ``--weights-in fast``) counts too."""
    elf = read_elf(elf_path)
    sections = {s.name: s for s in elf.sections if s.alloc}
    kernel_stems = {Path(k).stem for k in kernel_sources}
    report = SizeReport()
    attributed: dict[str, int] = {}
    in_ram = {name for name, sec in sections.items() if any(a <= sec.addr < b for a, b in ram_regions)}
    for current, origin, size in _placed(map_path, set(sections)):
        sec = sections[current]
        attributed[current] = attributed.get(current, 0) + size
        category = _category(current, origin, prefix, kernel_stems)
        if sec.type != SHT_NOBITS:
            report.flash[category] += size
        if sec.flags & SHF_WRITE or current in in_ram:
            report.ram[category] += size
    # Reservations (the stack) and alignment padding: what a section holds beyond its input sections.
    for name, sec in sections.items():
        rest = sec.size - attributed.get(name, 0)
        if rest <= 0:
            continue
        category = "stack" if name.startswith((".stack", ".heap")) else \
            "arenas" if name.startswith(".mcu_arena") else "other"
        if sec.type != SHT_NOBITS:
            report.flash[category] += rest
        if sec.flags & SHF_WRITE:
            report.ram[category] += rest
    if flash_bytes is not None:
        report.flash["other"] += max(0, flash_bytes - report.flash_total)
    if ram_bytes is not None:
        report.ram["other"] += max(0, ram_bytes - report.ram_total)
    return report
