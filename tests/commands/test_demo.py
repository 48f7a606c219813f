"""`make demo`: the int8 program next to fp32, both run in QEMU, in one table."""

from __future__ import annotations

import re

from mcu.commands.demo import main
from repo import requires_qemu


@requires_qemu
def test_demo_prints_int8_next_to_fp32(capsys) -> None:
    assert main(["--board", "mps2-an505"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split() == ["fp32", "int8"]
    figures = {}
    for ln in lines[2:6]:
        m = re.match(r"(.+?)\s+([\d,]+)\s+([\d,]+)$", ln)
        assert m, ln
        figures[m.group(1)] = [int(v.replace(",", "")) for v in m.groups()[1:]]
    fp32, int8 = zip(*figures.values())
    # int8 is the point: fewer instructions, less flash and RAM than fp32 for the same model (flash too: the
    # model's build leaves out the packed convolution's paths its layers do not take, specialise.py).
    assert all(i < f for i, f in zip(int8, fp32)), figures
    # the timing model's estimate, next to the exact count: fewer cycles for int8 too, ms at 25 MHz
    cycles = re.search(r"cycles per inference \(estimate\)\s+([\d,]+)\s+([\d,]+)$", out, re.M)
    ms = re.search(r"ms at 25 MHz \(estimate\)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert cycles and ms, out
    fp32_cycles, int8_cycles = (int(v.replace(",", "")) for v in cycles.groups())
    assert int8_cycles < fp32_cycles
    assert int8_cycles >= figures["instructions per inference"][1]  # no core retires more than one per cycle here
    assert abs(float(ms.group(2)) - int8_cycles / 25e3) < 1e-3
    assert re.search(r"bundled test vectors\s+3 PASS\s+3 PASS", out)
    assert re.search(r"differences from the reference\s+\S+ max\s+0 \(bit-exact\)", out)
