"""Program-file benchmark (not a test): for every reference model at int8 and fp32 on mps2-an505 (Cortex-M33),
the flash of the generated-C firmware next to the interpreter firmware (runtime, interpreter, the model's
kernels) plus its program file, the instructions per inference of both (QEMU, exact counts between the bench
markers: inputs in, every op, outputs out), and the interpreter's own code size.

Program files are architecture independent, so the interpreter runs the portable kernels (with their
per-core paths); the generated C it is compared with is built the same way (``packed_weights=False``), so
the overhead is the interpreter's own. The last column is the default generated C on a DSP core, whose
convolutions run on packed weights (mcu/backends/optimized/tuned.py).

    .venv/bin/python bench/program.py [--models small_cnn,ds_cnn] [--board mps2-an505]
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcu.api import compile_file  # noqa: E402
from mcu.device.boards import load_board  # noqa: E402
from mcu.emit.kernels import program_call  # noqa: E402
from mcu.plan.memory import scratch_bytes  # noqa: E402
from mcu.program.device import build_interpreter_firmware, interpreter_code_size, run_program  # noqa: E402

MODELS = ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder", "digits_cnn"]
_MAP_LINE = re.compile(r"^\s*(?:\S+\s+)?0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S+\.o)\s*$")


def model_kernels(cm) -> set[str]:
    """The C kernels a model's program calls (the kernel subset of its interpreter firmware)."""
    kernels = set()
    for op in cm.graph.ops:
        planned = cm.memory.scratch_offsets.get(id(op))
        scratch = None if planned is None else (cm.memory.scratch_arena_index(op), planned, scratch_bytes(op))
        call = program_call(op, lambda t: (cm.memory.arena_index(t), cm.memory.offset(t)), scratch)
        if call is not None:
            kernels.add(call.function)
    return kernels


def linked_bytes(map_path: Path, flash_origin: int, flash_end: int, stem_pattern: str) -> int:
    """Flash bytes the linker map attributes to objects whose name matches ``stem_pattern``."""
    total = 0
    pattern = re.compile(stem_pattern)
    lines = map_path.read_text(errors="replace").split("Linker script and memory map", 1)[-1].splitlines()
    for prev, line in zip([""] + lines, lines):
        m = _MAP_LINE.match(line)
        if m is None:
            continue
        addr, size, obj = int(m.group(1), 16), int(m.group(2), 16), Path(m.group(3)).name
        section = (line.split()[0] if line.startswith(" .") else prev.strip())
        if flash_origin <= addr < flash_end and size and pattern.search(obj) and not section.startswith(".debug"):
            total += size
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    parser.add_argument("--board", default="mps2-an505")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    board = load_board(args.board)

    for opt in ("-Os", "-O2"):
        size = interpreter_code_size(board, opt)
        files = ", ".join(f"{k.removeprefix('mcu_program_').removesuffix('.c')} {v}" for k, v in size.per_file.items())
        print(f"interpreter code ({board.core}, {opt}, every function): {size.total} B  ({files})")
    full = build_interpreter_firmware(board)
    print(f"interpreter firmware with every kernel: {full.flash_bytes} B flash (built once, runs any program)")
    print()
    head = (f"{'model':<15}{'q':<5}{'gen-C fw':>10}{'weights':>9}{'vectors':>9}{'interp fw':>10}{'interp':>8}"
            f"{'program':>9}{'+vectors':>10}{'gen insns':>12}{'interp insns':>13}{'overhead':>10}{'%':>7}"
            f"{'packed insns':>13}")
    print(head)
    print("-" * len(head))
    for name in args.models.split(","):
        for quantize in ("int8", "none"):
            path = ROOT / "examples" / f"{name}.py"
            cm = compile_file(path, board=board.name, quantize=quantize, packed_weights=False)
            fast = compile_file(path, board=board.name, quantize=quantize)
            packed = "-"
            if any(s.call.function != c.call.function for s, c in zip(fast.library.view.steps, cm.library.view.steps)):
                fast_sim = fast.simulate()
                packed = f"{fast_sim.instructions or 0:,}" if fast_sim.passed else "FAILED"
            gen = cm.build()
            sizes = gen.sizes
            weights = sizes.flash.get("weights", 0) if sizes else 0
            vectors = sizes.flash.get("test harness", 0) if sizes else 0
            kernels = model_kernels(cm)
            interp = build_interpreter_firmware(board, kernels)
            interp_code = linked_bytes(interp.map_path, board.flash.origin, board.flash.end, r"mcu_program_")
            program = cm.program_image().program
            bundled = cm.program_image(bundle_tests=True).program
            run = run_program(board, interp.elf, bundled)
            sim = cm.simulate()
            if not (run.passed and sim.passed):
                print(f"{name} {quantize}: FAILED (interpreter {run.passed}, generated C {sim.passed})")
                continue
            g, i = sim.instructions or 0, run.instructions[0]
            print(f"{name:<15}{'int8' if quantize == 'int8' else 'fp32':<5}{gen.flash_bytes:>10}{weights:>9}"
                  f"{vectors:>9}{interp.flash_bytes:>10}{interp_code:>8}{len(program):>9}{len(bundled):>10}"
                  f"{g:>12}{i:>13}{i - g:>10}{100.0 * (i - g) / g:>6.2f}%{packed:>13}", flush=True)
    print()
    print("gen-C fw: generated-C firmware flash (code, weights and the bundled test vectors); weights / vectors: "
          "its bytes of weights and of the test harness with the vectors.")
    print("interp fw: interpreter firmware with only the model's kernels (runtime, interpreter, kernels, harness); "
          "interp: the interpreter's part of it (-O2, as linked).")
    print("program / +vectors: the program file without and with the bundled test vectors (what goes into the "
          "program region). insns: instructions of the first inference in QEMU. gen-C columns: the portable kernels "
          "the interpreter also runs; packed insns: the default generated C with packed weights, where it differs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
