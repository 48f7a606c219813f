"""The flash each kernel source takes on each QEMU board, read from the linker maps of firmwares that use it:
the table ``--quantize mixed`` charges its kernel code from (mcu/backends/kernel_code.py, rewritten by this
script).

Each example is built with every layer ``--quantize mixed`` can narrow at one form (int8 with the compact
weight layout, int4, a 3-bit table, int8 weights at int16 activations), so that every kernel a form links
appears in some map; a source's bytes are the most any of its maps kept of it.

    .venv/bin/python bench/kernel_code.py [--boards mps2-an505,...] [--examples digits_cnn,ds_cnn] [--write]
    .venv/bin/python bench/kernel_code.py --forms a16 --examples ds_cnn --merge --write   # add the 16x8 ones
"""

from __future__ import annotations

import argparse
import copy
import pprint
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOARDS = "mps2-an385-m0plus,mps2-an385,mps2-an386,mps2-an505,mps3-an547"
TABLE = ROOT / "mcu" / "backends" / "kernel_code.py"
HEADER = '''"""Flash bytes of each kernel source as linked on each board (the linker map's share of its object file),
written by bench/kernel_code.py from firmwares of digits_cnn and ds_cnn with every narrowable layer at one
form. ``--quantize mixed`` charges a configuration the sources its layers use, once each
(mcu/backends/mixed_flash.py)."""

'''


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=BOARDS)
    parser.add_argument("--examples", default="digits_cnn,ds_cnn")
    parser.add_argument("--forms", default="int8,int4,lut3,a16",
                        help="a16: every layer that can at int16 activations (the 16x8 kernels and the borders)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the table's other figures, replacing those of the sources measured now")
    parser.add_argument("--write", action="store_true", help=f"rewrite {TABLE.relative_to(ROOT)}")
    args = parser.parse_args(argv)

    # lazy: torch and the compiler load after the arguments parse
    from mcu.api import backend_options, lower_file
    from mcu.device.mapfile import object_flash
    from mcu.backends.kernel_code import CODE_BYTES
    from mcu.passes import mixed, mixed_s16

    table: dict[str, dict[str, int]] = {b: dict(r) for b, r in CODE_BYTES.items()} if args.merge else {}
    measured: set[tuple[str, str]] = set()
    for name in args.examples.split(","):
        lowered = lower_file(ROOT / "examples" / f"{name}.py", quantize="int8")
        indices = mixed.layers(lowered.graph.ops)
        for form in args.forms.split(","):
            forced = copy.deepcopy(lowered)
            if form == mixed_s16.A16:
                mixed_s16.widen(forced.graph, {i for i in indices if mixed_s16.feasible(forced.graph.ops[i])})
            for i in indices if form != mixed_s16.A16 else ():
                mixed.apply(forced.graph.ops[i], form)
            for board in args.boards.split(","):
                cm = forced.compile(board, backend_options(packed_weights=False))
                fw = cm.build()
                kernels = {Path(k).stem for k in cm.library.kernel_sources}
                sizes = object_flash(fw.elf.with_suffix(".map"), fw.elf)
                row = table.setdefault(board, {})
                for stem in sorted(kernels):
                    old = row.get(stem, 0) if (board, stem) in measured else 0
                    row[stem] = max(old, sizes.get(stem, 0))
                    measured.add((board, stem))
                model = sum(fw.sizes.flash[c] for c in ("runtime", "kernels", "model code", "weights"))
                print(f"{name} {form} {board}: model flash {model} B, kernels {fw.sizes.flash['kernels']} B",
                      flush=True)
    table = {b: dict(sorted(r.items())) for b, r in sorted(table.items())}
    body = pprint.pformat(table, width=116, sort_dicts=True)
    text = HEADER + "CODE_BYTES: dict[str, dict[str, int]] = " + body + "\n"
    if args.write:
        TABLE.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
