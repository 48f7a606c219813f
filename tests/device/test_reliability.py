"""Reliability: concurrent builds into one folder, weights integrity, load-time validation,
names as UTF-8, and bad output paths as one-line errors with exit 2."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from cli_runner import mcu_in_process
from host_builds import build_interpreter_app
from mcu.program import format as fmt
from mcu.program.host import Program, ProgramError, WeightsCorruptError
from repo import ROOT, requires_qemu

STATUS_WEIGHTS_CORRUPT = 18
STATUS_ARENA_LIMIT = 19
STATUS_INVALID = 7

TINY_MODEL = """
import torch
from torch import nn
torch.manual_seed({seed})
model = nn.Sequential(nn.Linear(16, {hidden}), nn.ReLU(), nn.Linear({hidden}, 4)).eval()
example_inputs = (torch.randn(1, 16),)
calibration = [(torch.randn(1, 16),) for _ in range(4)]
"""


def run_mcu(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A real `mcu` process: the concurrent builds need two processes (the in-process runner for the rest)."""
    env = {k: v for k, v in os.environ.items() if k != "MCU_DEBUG"}
    return subprocess.run([sys.executable, "-m", "mcu.commands.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=900)


def assert_exit2_one_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("mcu:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def model_file(tmp: Path, name: str, seed: int = 0, hidden: int = 8) -> Path:
    path = tmp / f"{name}.py"
    path.write_text(TINY_MODEL.format(seed=seed, hidden=hidden))
    return path


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory):
    """A small int8 program with external weights and bundled vectors (program bytes, weights bytes)."""
    from mcu.program.methods import compile_methods
    from mcu.program.writer import program_from

    path = model_file(tmp_path_factory.mktemp("ext"), "tiny", hidden=12)
    image = program_from(compile_methods(path, quantize="int8"), external_weights=True, bundle=True)
    assert image.weights is not None
    return image.program, image.weights


def _external_segments(program: bytes) -> list[tuple[int, int, int]]:
    """(offset, size, crc) of every EXTERNAL segment, read with the mutation tool's flatbuffer walker."""
    walker = _mutate_tool()._Walker(program)
    root = fmt.HEADER_SIZE + walker.u32(fmt.HEADER_SIZE)
    out = []
    for seg in walker.tables(root, 3, "segments"):
        loc = walker.field(seg, 1)
        if loc and program[loc] == fmt.SEGMENT_EXTERNAL:
            vals = [walker.u32(walker.field(seg, s)) if walker.field(seg, s) else 0 for s in (2, 3, 4)]
            out.append((vals[0], vals[1], vals[2]))
    return out


def _mutate_tool():
    spec = importlib.util.spec_from_file_location("mutate_programs", ROOT / "scripts" / "mutate_programs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate_programs"] = module
    spec.loader.exec_module(module)
    return module


def corrupt_one_weight(weights: bytes, program: bytes) -> bytes:
    """One byte changed inside the first external segment; the weights header (content id kept, as it names
    the file) and its file CRC made consistent, so only the program's segment CRC can tell."""
    offset, size, _crc = _external_segments(program)[0]
    data_offset = fmt.read_header(weights).data_offset
    blob = bytearray(weights)
    blob[data_offset + offset + size // 2] ^= 0x01
    struct.pack_into("<I", blob, 60, fmt.file_crc(bytes(blob)))
    return bytes(blob)


def test_new_status_codes_have_names() -> None:
    from mcu._native import status_str

    assert status_str(STATUS_WEIGHTS_CORRUPT) == "weights corrupt"
    assert status_str(STATUS_ARENA_LIMIT) == "arena beyond the RAM limit"


def test_every_segment_records_its_crc(external) -> None:
    program, weights = external
    segs = _external_segments(program)
    data = weights[fmt.read_header(weights).data_offset:]
    assert segs and all(zlib.crc32(data[o:o + n]) == crc for o, n, crc in segs)


def test_changed_weight_byte_is_refused_through_program_load(external) -> None:
    program, weights = external
    prog = Program.load(program, weights)
    ins, expected, _ = prog.method("forward").bundled(0)
    assert all(np.array_equal(a, b) for a, b in zip(prog.method("forward").run_raw(*ins), expected))
    bad = corrupt_one_weight(weights, program)
    assert fmt.read_header(bad).content_id == fmt.read_header(weights).content_id
    with pytest.raises(WeightsCorruptError) as err:
        Program.load(program, bad)
    assert err.value.status == STATUS_WEIGHTS_CORRUPT and isinstance(err.value, ProgramError)
    assert "weights corrupt" in str(err.value) and "export the program and its weights again" in str(err.value)
    # The CRC-32 skip (for fuzzing the verifier) skips this check too, and the data then loads.
    Program.load(program, bad, verify_checksum=False)


LOADER_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "mcu/program.h"

static uint8_t *slurp(const char *path, uint32_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    uint8_t *buf = aligned_alloc(16, 1u << 20);
    *n = (uint32_t)fread(buf, 1, 1u << 20, f);
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    uint32_t np = 0, nw = 0;
    uint8_t *p = slurp(argv[1], &np);
    uint8_t *w = argc > 2 ? slurp(argv[2], &nw) : NULL;
    const mcu_program_options options = {w, nw, NULL, 0, 0, NULL, 0, argc > 3 ? (uint32_t)atoi(argv[3]) : 0u};
    mcu_program prog;
    mcu_status st = mcu_program_load(&prog, p, np, &options);
    printf("%d %s\n", (int)st, mcu_status_str(st));
    free(p);
    free(w);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C interpreter built for the host with a main that loads a program and prints the status."""
    return build_interpreter_app(LOADER_MAIN, tmp_path_factory.mktemp("loader") / "loader")


def _c_load(exe: Path, tmp: Path, program: bytes, weights: bytes | None = None, limit: int = 0) -> str:
    (tmp / "p.mpk").write_bytes(program)
    args = [str(exe), str(tmp / "p.mpk")]
    if weights is not None:
        (tmp / "p.mpw").write_bytes(weights)
        args += [str(tmp / "p.mpw"), str(limit)]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout.strip()


def test_changed_weight_byte_is_refused_in_c(external, c_loader: Path, tmp_path: Path) -> None:
    program, weights = external
    assert _c_load(c_loader, tmp_path, program, weights) == "0 ok"
    assert _c_load(c_loader, tmp_path, program, corrupt_one_weight(weights, program)) == \
        f"{STATUS_WEIGHTS_CORRUPT} weights corrupt"


def _with_crc(blob: bytearray) -> bytes:
    struct.pack_into("<I", blob, 60, fmt.file_crc(bytes(blob)))
    return bytes(blob)


def test_reserved_header_words_must_be_zero(external, c_loader: Path, tmp_path: Path) -> None:
    program, weights = external
    for pos in (52, 56):
        bad = bytearray(program)
        bad[pos] = 1
        assert _c_load(c_loader, tmp_path, _with_crc(bad), weights) == f"{STATUS_INVALID} invalid program"
        with pytest.raises(ProgramError) as err:
            Program.load(_with_crc(bad), weights)
        assert err.value.status == STATUS_INVALID


def test_arena_beyond_the_limit_is_refused(external, c_loader: Path, tmp_path: Path) -> None:
    program, weights = external
    need = max(sum(sizes) for sizes in Program.load(program, weights).arena_sizes.values())
    assert _c_load(c_loader, tmp_path, program, weights, limit=need) == "0 ok"
    assert _c_load(c_loader, tmp_path, program, weights, limit=need - 1) == \
        f"{STATUS_ARENA_LIMIT} arena beyond the RAM limit"
    with pytest.raises(ProgramError) as err:
        Program.load(program, weights, arena_limit=need - 1)
    assert err.value.status == STATUS_ARENA_LIMIT and "arena_limit" in str(err.value)
    # An arena size of 0x7FFFFFFF (the probe) is refused under the default limit.
    tool = _mutate_tool()
    site = next(s for s in tool.sites_of(program) if s.label.endswith("arena_sizes[0]"))
    huge = bytearray(program)
    struct.pack_into("<I", huge, site.pos, 0x7FFFFFF0)
    assert _c_load(c_loader, tmp_path, _with_crc(huge), weights) == f"{STATUS_ARENA_LIMIT} arena beyond the RAM limit"


def test_non_utf8_names_raise_program_error(external) -> None:
    program, weights = external
    prog = Program.load(program, weights)
    name = prog.method("forward").inputs[0].name.encode()
    for bad in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80"):  # invalid byte, overlong '/', a surrogate
        blob = bytearray(program)
        pos = bytes(blob).index(name + b"\0")
        blob[pos:pos + len(bad)] = bad
        with pytest.raises(ProgramError) as err:
            Program.load(_with_crc(blob), weights)
        assert err.value.status == STATUS_INVALID
    # Well-formed multi-byte UTF-8 loads and reads back.
    blob = bytearray(program)
    pos = bytes(blob).index(name + b"\0")
    blob[pos:pos + 2] = "é".encode()
    assert Program.load(_with_crc(blob), weights).method("forward").inputs[0].name.startswith("é")


def test_seeded_mutation_sample(tmp_path_factory: pytest.TempPathFactory) -> None:
    """500 structure-aware mutations (the full run is scripts/mutate_programs.py): Program.load raises only
    ProgramError, and every program that loads runs its bundled vectors without an error status."""
    tool = _mutate_tool()
    seeds = tool.load_seeds(tmp_path_factory.mktemp("mutate") / "seeds", models=("convs",))
    assert {s.name for s in seeds} >= {"convs-none", "convs-int8", "convs-int8-external"}
    tally = tool.run(seeds, 500, seed=20)
    print(tally.summary())
    assert tally.mutations == 500 and tally.loaded > 25 and sum(tally.refused.values()) > 250
    assert tally.other_exceptions == []
    assert tally.run_errors == [], "\n".join(tally.run_errors[:10])


# --- bad output paths and directories named as files --------------------------------------------------------


def test_output_below_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    model = model_file(tmp_path, "tiny")
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "none", str(model), "-o",
                          str(tmp_path / "afile" / "out"))
    assert_exit2_one_line(proc, str(tmp_path / "afile"), "is a file, not a folder")
    proc = mcu_in_process("export", "--board", "mps2-an505", "--quantize", "none", str(model), "-o",
                          str(tmp_path / "afile" / "lib"))
    assert_exit2_one_line(proc, "cannot create output folder", "afile is a file")
    proc = mcu_in_process("export", "--format", "program", "--quantize", "none", str(model), "-o",
                          str(tmp_path / "afile" / "m.mpk"))
    assert_exit2_one_line(proc, str(tmp_path / "afile"), "is a file, not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may create folders anywhere: a read-only parent "
                                              "cannot be tested as root")
def test_output_folder_that_cannot_be_created(tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "none", str(model_file(tmp_path, "tiny")),
                              "-o", str(locked / "out"))
        assert_exit2_one_line(proc, "cannot create output folder", str(locked / "out"))
    finally:
        locked.chmod(0o700)


def test_output_folder_on_a_missing_device(tmp_path: Path) -> None:
    """A folder that cannot be created whoever runs it: below /proc, which refuses new entries."""
    proc = mcu_in_process("build", "--board", "mps2-an505", "--quantize", "none", str(model_file(tmp_path, "tiny")),
                          "-o", "/proc/mcu-no-such/out")
    assert_exit2_one_line(proc, "cannot create output folder /proc/mcu-no-such/out", "-o a folder you can write")


def test_export_program_to_an_existing_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.mpk").mkdir()
    proc = mcu_in_process("export", "--format", "program", "--quantize", "none", str(model_file(tmp_path, "tiny")),
                          "-o", str(tmp_path / "dir.mpk"))
    line = assert_exit2_one_line(proc, f"program file {tmp_path / 'dir.mpk'} is a folder")
    assert "model.mpk" in line  # the fix: name a file


def test_directory_as_model_file(tmp_path: Path) -> None:
    proc = mcu_in_process("build", "--board", "mps2-an505", str(tmp_path))
    assert_exit2_one_line(proc, f"model file {tmp_path} is a folder")


def test_directory_as_program_file(tmp_path: Path) -> None:
    from mcu.errors import McuError

    with pytest.raises(McuError, match="program file .* is a folder"):
        Program.load(tmp_path)
    (tmp_path / "p.mpk").write_bytes(b"x")
    with pytest.raises(McuError, match="weights file .* is a folder"):
        Program.load(tmp_path / "p.mpk", weights=tmp_path)


def test_export_program_verify_reads_back_what_is_on_disk(tmp_path: Path) -> None:
    model = model_file(tmp_path, "tiny")
    proc = mcu_in_process("export", "--format", "program", "--quantize", "int8", "--external-weights", "--bundle-tests",
                          "--verify", str(model), "-o", str(tmp_path / "out" / "tiny.mpk"))
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stdout and "bundled vector(s) match" in proc.stdout
    from mcu.program.host import verify_program_files

    weights = tmp_path / "out" / "tiny.mpw"
    program = (tmp_path / "out" / "tiny.mpk").read_bytes()
    weights.write_bytes(corrupt_one_weight(weights.read_bytes(), program))
    with pytest.raises(WeightsCorruptError):
        verify_program_files(tmp_path / "out" / "tiny.mpk", weights)


# --- concurrent builds ---------------------------------------------------------------------------------------


@requires_qemu
def test_concurrent_builds_into_one_folder_never_mix(tmp_path: Path) -> None:
    """Two `mcu build` processes into the same folder at once, two rounds: each either succeeds with the ELF
    on disk matching its own --json (its symbols, its flash size), or fails with the lock message."""
    from mcu.device.boards import load_board
    from mcu.device.elf import read_elf
    from mcu.device.toolchain import _firmware_from_elf

    models = [model_file(tmp_path, "alpha", seed=1, hidden=8), model_file(tmp_path, "beta", seed=2, hidden=64)]
    out = tmp_path / "shared-out"
    board = load_board("mps2-an505")
    outcomes = []
    for _ in range(2):
        with ThreadPoolExecutor(max_workers=2) as pool:
            procs = list(pool.map(lambda m: run_mcu("build", "--board", "mps2-an505", "--quantize", "none",
                                                    "--json", str(m), "-o", str(out)), models))
        ok = [(m, p) for m, p in zip(models, procs) if p.returncode == 0]
        for m, p in zip(models, procs):
            if p.returncode != 0:
                assert_exit2_one_line(p, f"output folder {out.resolve()}", "is in use by another mcu build",
                                      "pass a different -o")
        assert len(ok) >= 1
        for m, p in ok:  # with the lock held to the end, a success's report is what is on disk
            report = json.loads(p.stdout)
            elf = read_elf(Path(report["elf"]))
            names = {s.name for s in elf.symbols}
            other = next(x for x in models if x != m).stem
            assert any(n.startswith(f"{m.stem}_") for n in names), sorted(names)[:20]
            assert not any(n.startswith(f"{other}_") for n in names)
            fw = _firmware_from_elf(board, Path(report["elf"]), Path(report["elf"]).with_suffix(".map"), None)
            assert fw.flash_bytes == report["flash_bytes"] and fw.ram_bytes == report["ram_bytes"]
            assert sorted(p.name for p in (out / "src").iterdir() if p.name.startswith(other)) == []
        outcomes.append(len(ok))
    print(f"successes per round: {outcomes}")
