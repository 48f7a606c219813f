"""Worst-case stack of a firmware: GCC's ``-fstack-usage`` frames over the call graph of the linked ELF.

Frames: every object compiled with ``-fstack-usage`` leaves a ``.su`` file, one line per function
(``file:line:col:name<TAB>bytes<TAB>static|dynamic[,bounded]``). Library functions (newlib's memcpy,
libgcc) have none; their frame is read from the prologue in the disassembly (``push``/``stmdb sp!``,
``vpush``, ``sub sp, #n``). A frame GCC calls unbounded ``dynamic`` (alloca, variable-length arrays), or
a prologue that moves ``sp`` by a register, is refused with the function's name.

Call graph: ``arm-none-eabi-objdump -d`` of the linked ELF; an edge for every ``bl`` and for every branch
to the first instruction of another function (a tail call: the caller's frame is already popped, so
the callee's depth counts alone). Targets are resolved by address to the function that holds them,
never by the symbol objdump prints (an absolute linker symbol such as ``__stack_size__`` can be the
nearest name below a code address). A jump through a switch table (Thumb-1 has no ``tbb``: libgcc's
soft-float division dispatches this way) is a branch inside the function when the code bounds the index
and every table entry lies in the function. Any other indirect call (``blx rN``, or ``bx``/``mov pc`` through a register
other than ``lr``) in a function reachable from the entry point is refused: the generated code and the
runtime call kernels directly, so an indirect call means the bound would be a guess. Recursion is
refused the same way.

The worst case is the deepest path from ``Reset_Handler``. The linker script then reserves it plus
:data:`STACK_MARGIN` bytes: one exception entry with the floating-point context (26 words, 104 bytes,
pushed by the hardware on the main stack before the fault reporter switches to its own stack), rounded
up to 128 and to a multiple of 8.
"""

from __future__ import annotations

import bisect
import json
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from mcu.device.elf import read_elf
from mcu.errors import McuError

ENTRY = "Reset_Handler"
STACK_MARGIN = 128
# Entered through the vector table and run on their own stack (ports/cortex-m/startup.c).
_OWN_STACK = ("mcu_cm_fault_entry", "mcu_cm_fault_report")

_FUNC = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_TARGET = re.compile(r"^([0-9a-f]+) <([^>+]+)(\+0x[0-9a-f]+)?>")
_REGLIST = re.compile(r"\{([^}]*)\}")
_IMM = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class StackReport:
    worst_case_bytes: int  # deepest path from the entry point
    margin_bytes: int
    reserved_bytes: int  # what the linker script reserves: worst case + margin, 8-byte aligned
    path: list[tuple[str, int]]  # the deepest call chain: (function, its frame in bytes)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> StackReport:
        return cls(worst_case_bytes=d["worst_case_bytes"], margin_bytes=d["margin_bytes"],
                   reserved_bytes=d["reserved_bytes"], path=[(f, int(b)) for f, b in d["path"]])

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json()))

    def chain(self) -> str:
        return " -> ".join(f"{f} ({b} B)" for f, b in self.path)


def read_su(paths: Sequence[Path]) -> dict[str, int]:
    """Frame bytes per function from GCC ``.su`` files (the larger when two static functions share a name)."""
    frames: dict[str, int] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            parts = line.split("\t")
            if len(parts) != 3:
                continue
            name = parts[0].rsplit(":", 1)[-1]
            size, kind = int(parts[1]), parts[2]
            if "dynamic" in kind and "bounded" not in kind:
                raise McuError(f"cannot bound the stack: {name} ({parts[0].rsplit(':', 3)[0]}) has a frame of "
                               "run-time size (alloca or a variable-length array)",
                               hint="give the array a compile-time size")
            frames[name] = max(size, frames.get(name, 0))
    return frames


@dataclass
class _Function:
    name: str
    addr: int
    prologue_bytes: int = 0
    calls: set[str] | None = None
    tail_calls: set[str] | None = None
    indirect: str | None = None  # the first indirect call instruction, when there is one
    dynamic_sp: str | None = None


def _reg_count(operands: str) -> int:
    m = _REGLIST.search(operands)
    if not m:
        return 0
    count = 0
    for item in m.group(1).split(","):
        item = item.strip()
        if "-" in item:  # a range such as d8-d15
            lo, hi = item.split("-")
            count += int(hi.strip()[1:]) - int(lo.strip()[1:]) + 1
        elif item:
            count += 1
    return count


def _word_reader(elf: Path) -> Callable[[int], int | None]:
    """Little-endian words of the loaded image by address (None where nothing is loaded)."""
    segments = read_elf(elf).load_segments()

    def word(addr: int) -> int | None:
        for seg in segments:
            if seg.vaddr <= addr and addr + 4 <= seg.vaddr + seg.filesz:
                return int.from_bytes(seg.data[addr - seg.vaddr : addr - seg.vaddr + 4], "little")
        return None

    return word


_LDR_TABLE = re.compile(r"^(r\d+), \[(r\d+), (r\d+)\]$")
_LDR_LITERAL = re.compile(r"^(r\d+), \[pc, #\d+\]\s+@ \(([0-9a-f]+)")
_LSL2 = re.compile(r"^(r\d+), (r\d+), #2$")
_CMP_IMM = re.compile(r"^(r\d+), #(\d+)")
_NO_WRITE = ("cmp", "cmn", "tst", "b", "bl", "bls", "bhi", "bcc", "bcs", "bne", "beq", "str", "strb", "strh")


def _jump_table(insns: list[tuple[int, str, str]], at: int, reg: str, word: Callable[[int], int | None],
                lo: int, hi: int) -> bool:
    """True when the register jump at ``insns[at]`` is a bounded switch table of this function.

    GCC compiles a switch on Thumb-1 (libgcc's soft-float division among others) to ``cmp rS, #N``;
    ``bhi``/``bls`` to the default; ``ldr rB, =table``; ``lsls rI, rS, #2``; ``ldr rD, [rB, rI]``;
    ``mov pc, rD``. When the N+1 table words are all addresses inside [lo, hi), the jump is a branch
    within the function: it adds no frame. Anything else stays an indirect call."""
    window = insns[max(0, at - 12) : at]
    if _exact_table(window, reg, word, lo, hi):
        return True
    # GCC may hoist the table address out of a loop (``ldr rB, =table; add r8, rB`` before it, then
    # ``mov r3, r8; ldr r3, [r3]; mov pc, r3``): then the bound checked just before the jump, and a table
    # of this function (a literal-pool address) with that many entries, all in the function.
    cmp = next((window[i] for i in range(len(window) - 2, -1, -1) if window[i][1].split(".")[0] == "cmp"
                and _CMP_IMM.match(window[i][2]) and window[i + 1][1].split(".")[0] in ("bhi", "bls")), None)
    if cmp is None:
        return False
    bound = int(_CMP_IMM.match(cmp[2]).group(2))  # type: ignore[union-attr]
    for _, mnemonic, operands in insns:
        m = _LDR_LITERAL.match(operands)
        if mnemonic.split(".")[0] == "ldr" and m and (table := word(int(m.group(2), 16))) is not None:
            entries = [word(table + 4 * k) for k in range(bound + 1)]
            if all(e is not None and lo <= (e & ~1) < hi for e in entries):
                return True
    return False


def _exact_table(window: list[tuple[int, str, str]], reg: str, word: Callable[[int], int | None],
                 lo: int, hi: int) -> bool:
    ldr_at = next((i for i in range(len(window) - 1, -1, -1) if window[i][1].split(".")[0] == "ldr"
                   and (m := _LDR_TABLE.match(window[i][2])) and m.group(1) == reg), None)
    if ldr_at is None:
        return False
    _, base, index = _LDR_TABLE.match(window[ldr_at][2]).groups()  # type: ignore[union-attr]
    table = source = None
    cmp_at = None
    for i in range(ldr_at - 1, -1, -1):
        op, operands = window[i][1].split(".")[0], window[i][2]
        if table is None and op == "ldr" and (m := _LDR_LITERAL.match(operands)) and m.group(1) == base:
            table = word(int(m.group(2), 16))
        elif source is None and op == "lsls" and (m := _LSL2.match(operands)) and m.group(1) == index:
            source = m.group(2)
        elif source is not None and op == "cmp" and (m := _CMP_IMM.match(operands)) and m.group(1) == source:
            cmp_at = i
            bound = int(m.group(2))
            break
        elif source is not None and op not in _NO_WRITE and operands.split(",")[0].strip() == source:
            return False  # the index changes after the code checked it
    if table is None or cmp_at is None or cmp_at + 1 >= len(window):
        return False
    if window[cmp_at + 1][1].split(".")[0] not in ("bhi", "bls"):  # an unsigned bound on the index
        return False
    for k in range(bound + 1):
        target = word(table + 4 * k)
        if target is None or not lo <= (target & ~1) < hi:
            return False
    return True


def disassemble(objdump: Path, elf: Path) -> dict[str, _Function]:
    proc = subprocess.run([str(objdump), "-d", "--no-show-raw-insn", str(elf)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise McuError(f"disassembling {elf.name} for the stack analysis failed: {proc.stderr.strip()[:300]}")
    # One block per symbol in the listing: two static functions may share a name (each object's own
    # ``foo.constprop.0``); each is read at its own address, then they are merged by name below.
    blocks: list[tuple[_Function, list[tuple[int, str, str]]]] = []
    for line in proc.stdout.splitlines():
        if m := _FUNC.match(line):
            blocks.append((_Function(name=m.group(2), addr=int(m.group(1), 16), calls=set(), tail_calls=set()), []))
        elif blocks and (m := _INSN.match(line)):
            blocks[-1][1].append((int(m.group(1), 16), m.group(2), m.group(3)))
    # Branch targets are resolved by address: objdump names an address after the nearest symbol below
    # it, which may be an absolute linker symbol (``__stack_size__``) rather than the function holding it.
    blocks.sort(key=lambda b: b[0].addr)
    starts = [fn.addr for fn, _ in blocks]
    ends = [insns[-1][0] + 4 if insns else fn.addr for fn, insns in blocks]

    def holder(addr: int) -> _Function | None:
        i = bisect.bisect_right(starts, addr) - 1
        return blocks[i][0] if i >= 0 and addr < ends[i] else None

    word: Callable[[int], int | None] | None = None
    for (fn, insns), end in zip(blocks, ends):
        assert fn.calls is not None and fn.tail_calls is not None
        for at, (_, mnemonic, operands) in enumerate(insns):
            op = mnemonic.split(".")[0]
            target = _TARGET.match(operands)
            if op in ("push", "stmdb", "stmfd") and (op == "push" or operands.startswith("sp!")):
                fn.prologue_bytes += 4 * _reg_count(operands)
            elif op == "vpush":
                fn.prologue_bytes += 8 * _reg_count(operands) if "d" in operands else 4 * _reg_count(operands)
            elif op in ("sub", "subw") and operands.startswith("sp,"):
                imm = _IMM.search(operands)
                if imm:
                    fn.prologue_bytes += int(imm.group(1))
                elif fn.dynamic_sp is None:
                    fn.dynamic_sp = f"{mnemonic} {operands}"
            elif op == "bl" and target:
                addr = int(target.group(1), 16)
                callee = holder(addr)
                # Thumb-1 (ARMv6-M) has no long unconditional branch: GCC jumps far inside a function
                # with BL. That is a branch, not recursion (a BL to the function's own start is).
                if callee is None:
                    fn.indirect = fn.indirect or f"{mnemonic} {operands} (no function there)"
                elif callee is not fn or addr == fn.addr:
                    fn.calls.add(callee.name)
            elif op in ("blx",) and not target:
                fn.indirect = fn.indirect or f"{mnemonic} {operands}"
            elif op in ("bx", "mov") and fn.indirect is None:
                reg = operands.strip() if op == "bx" else operands.replace(" ", "").removeprefix("pc,")
                if (op == "bx" or operands.replace(" ", "").startswith("pc,")) and reg != "lr":
                    if word is None:
                        word = _word_reader(elf)
                    if not _jump_table(insns, at, reg, word, fn.addr, end):
                        fn.indirect = f"{mnemonic} {operands}"
            elif op.startswith("b") and target:
                addr = int(target.group(1), 16)
                callee = holder(addr)
                if callee is not None and callee is not fn and callee.addr == addr:
                    fn.tail_calls.add(callee.name)
    funcs: dict[str, _Function] = {}
    for fn, _ in blocks:
        same = funcs.setdefault(fn.name, fn)
        if same is not fn:  # the larger frame and every call of both
            assert same.calls is not None and same.tail_calls is not None
            same.prologue_bytes = max(same.prologue_bytes, fn.prologue_bytes)
            same.calls |= fn.calls or set()
            same.tail_calls |= fn.tail_calls or set()
            same.indirect = same.indirect or fn.indirect
            same.dynamic_sp = same.dynamic_sp or fn.dynamic_sp
    return funcs


def analyze(elf: Path, su_files: Sequence[Path], objdump: Path, entry: str = ENTRY) -> StackReport:
    return bound(elf, read_su(su_files), objdump, entry)


def save_frames(frames: dict[str, int], path: Path) -> None:
    """The -fstack-usage frames of a build, kept beside its ELF so that later questions about the same
    image (the depth of one function, :func:`bound`) need no rebuild."""
    path.write_text(json.dumps(frames, sort_keys=True))


def load_frames(path: Path) -> dict[str, int]:
    return {str(k): int(v) for k, v in json.loads(path.read_text()).items()}


def bound(elf: Path, frames: dict[str, int], objdump: Path, entry: str = ENTRY) -> StackReport:
    """The deepest path from ``entry`` (a function of the image) with these frames; the margin and the
    reservation are the linker script's (meaningful for the reset handler, the whole firmware)."""
    funcs = disassemble(objdump, elf)
    if entry not in funcs:
        raise McuError(f"cannot bound the stack of {elf.name}: it has no {entry}")
    memo: dict[str, tuple[int, list[tuple[str, int]]]] = {}
    active: list[str] = []

    def frame(name: str) -> int:
        fn = funcs[name]
        if name in frames:
            # GCC gives a naked function (a hand-written assembly loop) 0 bytes whatever its own pushes
            # take: the larger of the two figures, so that such a frame is not left out of the bound.
            return max(frames[name], fn.prologue_bytes)
        if fn.dynamic_sp:
            raise McuError(f"cannot bound the stack of {elf.name}: {name} moves sp by a register "
                           f"(`{fn.dynamic_sp}`) and has no -fstack-usage figure")
        return fn.prologue_bytes

    def depth(name: str) -> tuple[int, list[tuple[str, int]]]:
        if name in memo:
            return memo[name]
        if name in active:
            cycle = " -> ".join(active[active.index(name):] + [name])
            raise McuError(f"cannot bound the stack of {elf.name}: recursion {cycle}",
                           hint="the device path must not recurse")
        fn = funcs.get(name)
        if fn is None:
            caller = f"{active[-1]} calls" if active else "call to"
            raise McuError(f"cannot bound the stack of {elf.name}: {caller} {name}, which is not in the image")
        if fn.indirect:
            raise McuError(f"cannot bound the stack of {elf.name}: {name} makes an indirect call "
                           f"(`{fn.indirect}`) that the analysis cannot resolve",
                           hint="call functions directly on the device path (no function pointers): the "
                                "linker script reserves the analysed worst case, so every call must be known")
        active.append(name)
        own = frame(name)
        best_call, best_path = 0, []
        for callee in sorted(fn.calls or ()):
            if callee in _OWN_STACK:
                continue
            d, p = depth(callee)
            if d > best_call:
                best_call, best_path = d, p
        best_tail, tail_path = 0, []
        for callee in sorted(fn.tail_calls or ()):
            d, p = depth(callee)
            if d > best_tail:
                best_tail, tail_path = d, p
        active.pop()
        result = (own + best_call, [(name, own), *best_path])
        if best_tail > result[0]:  # a tail call replaces this frame
            result = (best_tail, tail_path)
        memo[name] = result
        return result

    worst, path = depth(entry)
    reserved = (worst + STACK_MARGIN + 7) // 8 * 8
    return StackReport(worst_case_bytes=worst, margin_bytes=reserved - worst, reserved_bytes=reserved, path=path)
