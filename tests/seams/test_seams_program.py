"""The program loader where its parts meet: the operand signature of every kernel row, the per-row
constants of the recurrent kernels checked at load (a program that loads passes every kernel check when
it runs), the weights file's own CRC reported against the weights, zero padding between segments, and
the header's flags word."""

from __future__ import annotations

import dataclasses
import importlib.util
import struct
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from mcu.program import format as fmt
from mcu.program import writer
from mcu.program.fuzz import cached_fuzzer, find_fuzz_clang, run_inputs
from mcu.program.methods import compile_methods
from mcu.program.writer import program_from
from mcu.program.writer import ProgramImage
from mcu.program.host import Program, ProgramError, WeightsCorruptError

INVALID, WEIGHTS_MISMATCH, WEIGHTS_CORRUPT = 7, 12, 18
ROOT = Path(__file__).resolve().parents[2]

GRU_MODEL = """
import torch
from torch import nn
torch.manual_seed(11)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 6, batch_first=True)
        self.fc = nn.Linear(6, 3)
    def forward(self, x):
        y, _ = self.gru(x)
        return self.fc(y[:, -1])
model = M().eval()
example_inputs = (torch.randn(1, 5, 4),)
calibration = [(torch.randn(1, 5, 4),) for _ in range(4)]
"""

INT4_MODEL = """
import torch
from torch import nn
torch.manual_seed(9)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
example_inputs = (torch.randn(1, 64),)
calibration = [(torch.randn(1, 64),) for _ in range(4)]
"""

MLP_MODEL = """
import torch
from torch import nn
torch.manual_seed(12)
model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
example_inputs = (torch.randn(1, 8),)
calibration = [(torch.randn(1, 8),) for _ in range(4)]
"""


@lru_cache(maxsize=None)
def _methods(name: str, quantize: str, tmp: str) -> list:
    path = Path(tmp) / f"{name}.py"
    path.write_text({"gru": GRU_MODEL, "mlp": MLP_MODEL, "int4": INT4_MODEL}[name])
    return compile_methods(path, quantize=quantize)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    tmp = str(tmp_path_factory.mktemp("models"))
    return lambda name, quantize: _methods(name, quantize, tmp)


def _with_crc(blob: bytearray) -> bytes:
    struct.pack_into("<I", blob, 60, fmt.file_crc(bytes(blob)))
    return bytes(blob)


def _status(program: bytes, weights: bytes | None = None, verify_checksum: bool = True) -> int:
    try:
        Program.load(program, weights=weights, verify_checksum=verify_checksum)
    except ProgramError as exc:
        return exc.status
    return 0


def _extra_operands(monkeypatch: pytest.MonkeyPatch, function: str, count: int) -> None:
    """Make the writer give every call of ``function`` ``count`` more operands (repeats of its first one,
    before the output)."""
    original = writer.program_call

    def patched(*args, **kwargs):
        call = original(*args, **kwargs)
        if call is not None and call.function == function:
            ops = list(call.operands)
            call = dataclasses.replace(call, operands=ops[:-1] + [ops[0]] * count + ops[-1:])
        return call

    monkeypatch.setattr(writer, "program_call", patched)


def _segment_pos(image: ProgramImage, name: str) -> int:
    """File position of a segment of the program's data region."""
    seg = next(s for s in image.segments if s.name == name)
    return fmt.read_header(image.program).data_offset + seg.offset


# --- the operand signature -------------------------------------------------------------------------------

def test_a_gru_instruction_with_nine_operands_is_refused(models, monkeypatch, tmp_path) -> None:
    """The GRU's signature is the last row of the table: an operand count past its length read beyond the
    table (ASan: global-buffer-overflow). Refused at load, and clean under the ASan harness."""
    methods = models("gru", "int8")
    _extra_operands(monkeypatch, "mcu_gru_s8", 2)
    blob = program_from(methods).program
    assert _status(blob) == INVALID
    assert _status(blob, verify_checksum=False) == INVALID
    if find_fuzz_clang() is None:
        pytest.skip("no clang with libFuzzer for the ASan build (sudo apt-get install clang-14 "
                    "libclang-rt-14-dev); the load itself was checked above")
    (tmp_path / "gru9.mpk").write_bytes(blob)
    code, log = run_inputs(cached_fuzzer(), [tmp_path / "gru9.mpk"])
    assert code == 0 and "AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def test_an_operand_count_matching_the_next_row_is_refused(models, monkeypatch) -> None:
    """linear_f32's row ("FFfF") followed by "FF": ten operands must not pass as the signature
    "FFfF\\0\\0\\0\\0FF" read across both rows (the extra operands, the input again, are large enough
    for what the kernel would read: only the signature stands in the way)."""
    methods = models("mlp", "none")
    assert _status(program_from(methods).program) == 0
    _extra_operands(monkeypatch, "mcu_linear_f32", 6)
    assert _status(program_from(methods).program) == INVALID


# --- the per-row constants of the recurrent kernels -----------------------------------------------------

def _run_all(prog: Program, x: np.ndarray) -> None:
    for m in prog.methods:
        m.run_raw(x)


def test_every_gru_row_constant_is_checked_at_load(models) -> None:
    """Each word of the GRU's per-row constants (bias, multiplier, shift of both products) and of its
    sigmoid table set to boundary values, file CRC fixed: the program is refused at load or it runs (never
    loaded and then refused by the kernel)."""
    image = program_from(models("gru", "int8"))
    prog = Program.load(image.program)
    x = np.random.default_rng(0).integers(-128, 128, prog.methods[0].inputs[0].numel).astype(np.int8)
    _run_all(prog, x)
    rows = _segment_pos(image, "const:gru_rows")
    table = _segment_pos(image, "const:recurrent_sigmoid_table")
    refused = ran = 0
    sites = [(rows + 4 * i, "<i", v) for i in range(3 * 6 * 6)
             for v in (-1, 31, -32, (1 << 30) + 1, -(1 << 30) - 1, 7)]
    sites += [(table + 2 * k, "<h", v) for k in (0, 1, 128, 255, 256) for v in (-1, 0, 32767)]
    for pos, form, value in sites:
        blob = bytearray(image.program)
        struct.pack_into(form, blob, pos, value)
        try:
            mutant = Program.load(_with_crc(blob))
        except ProgramError as exc:
            assert exc.status == INVALID, (pos, value, exc)
            refused += 1
            continue
        _run_all(mutant, x)  # raises ProgramError if a kernel refuses what the loader accepted
        ran += 1
    assert refused > 100 and ran > 50, (refused, ran)


def test_a_bad_gru_row_constant_is_refused_at_load_not_at_run(models) -> None:
    image = program_from(models("gru", "int8"))
    rows = _segment_pos(image, "const:gru_rows")
    for word, value in ((1, -5), (2, 31), (5, -32), (0, (1 << 30) + 1)):  # multiplier, shifts, bias of row 0
        blob = bytearray(image.program)
        struct.pack_into("<i", blob, rows + 4 * word, value)
        with pytest.raises(ProgramError) as err:
            Program.load(_with_crc(blob))
        assert err.value.status == INVALID
    blob = bytearray(image.program)  # the sigmoid table no longer increasing
    pos = _segment_pos(image, "const:recurrent_sigmoid_table") + 2 * 200
    struct.pack_into("<h", blob, pos, struct.unpack_from("<h", blob, pos + 2)[0] + 1)
    assert _status(_with_crc(blob)) == INVALID


def _sites_of(program: bytes) -> list:
    """Every scalar of a program file, labelled (scripts/mutate_programs.py's walk of the flatbuffer)."""
    spec = importlib.util.spec_from_file_location("mutate_programs", ROOT / "scripts" / "mutate_programs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutate_programs"] = module
    spec.loader.exec_module(module)
    return module.sites_of(program)


def _sweep_params(program: bytes, kernels: tuple[int, ...]) -> tuple[int, int]:
    """Each parameter word of every instruction of ``kernels`` set to neighbouring and boundary values, the
    file CRC fixed: refused at load, or every method runs on zero inputs. (refused, ran)."""
    refused = ran = 0
    sites = [s for s in _sites_of(program) if any(f"(k{k}).params[" in s.label for k in kernels)]
    assert sites, kernels
    for site in sites:
        old = struct.unpack_from("<i", program, site.pos)[0]
        for value in {old - 1, old + 1, 0, 1, -1, 2 * old + 1}:
            blob = bytearray(program)
            struct.pack_into("<i", blob, site.pos, max(-(1 << 31), min(value, (1 << 31) - 1)))
            try:
                prog = Program.load(_with_crc(blob))
            except ProgramError as exc:
                assert exc.status == INVALID, (site.label, value, exc)
                refused += 1
                continue
            for m in prog.methods:  # raises ProgramError if a kernel refuses what the loader accepted
                m.run_raw(*[np.zeros(t.numel, np.dtype(t.dtype)) for t in m.inputs])
            ran += 1
    return refused, ran


def test_in_place_depthwise_and_recurrent_params_are_checked_at_load(compiled, models) -> None:
    """The in-place depthwise convolution (DS-CNN) and the recurrent layers: a parameter word the kernel
    would refuse on its first run is refused at load."""
    refused, ran = _sweep_params(compiled("ds_cnn", quantize="int8").program_image().program,
                                 (fmt.KERNEL_IDS["mcu_depthwise_conv2d_s8_inplace"],))
    assert refused > 50 and ran > 10, (refused, ran)
    refused, ran = _sweep_params(program_from(models("gru", "int8")).program, (fmt.KERNEL_IDS["mcu_gru_s8"],))
    assert refused > 10 and ran > 5, (refused, ran)


# --- the weights file, padding, flags -------------------------------------------------------------------

def test_a_stale_weights_crc_names_the_weights_file(models, tmp_path) -> None:
    image = program_from(models("mlp", "int8"), external_weights=True, weights_name="mlp.mpw")
    assert image.weights is not None
    (tmp_path / "mlp.mpk").write_bytes(image.program)
    weights = bytearray(image.weights)
    weights[-1] ^= 0x01  # a weight byte changed, the weights header's CRC now stale
    (tmp_path / "mlp.mpw").write_bytes(weights)
    with pytest.raises(WeightsCorruptError) as err:
        Program.load(tmp_path / "mlp.mpk", weights=tmp_path / "mlp.mpw")
    text = str(err.value)
    assert err.value.status == WEIGHTS_CORRUPT and "program checksum" not in text
    assert f"weights file {tmp_path / 'mlp.mpw'}" in text, text
    with pytest.raises(WeightsCorruptError) as err:  # found beside the program
        Program.load(tmp_path / "mlp.mpk")
    assert f"weights file {tmp_path / 'mlp.mpw'}" in str(err.value)
    # A file that is no weights file at all (its magic): a mismatch, named likewise.
    weights = bytearray(image.weights)
    weights[:4] = b"MCUP"
    with pytest.raises(ProgramError) as err:
        Program.load(image.program, weights=bytes(weights))
    assert err.value.status == WEIGHTS_MISMATCH and "weights file <bytes>" in str(err.value)


def _padding_positions(data_offset: int, segments: list, location: int, size: int) -> list[int]:
    """Positions of the padding bytes after each segment of one location in its file."""
    spans = sorted((s.offset, s.offset + len(s.data)) for s in segments if s.location == location)
    gaps = [(end, nxt) for (_, end), (nxt, _) in zip(spans, spans[1:] + [(size, size)]) if nxt > end]
    return [data_offset + start for start, _ in gaps]


def test_nonzero_padding_between_segments_is_refused(models) -> None:
    image = program_from(models("gru", "int8"), bundle=True)
    head = fmt.read_header(image.program)
    pads = _padding_positions(head.data_offset, image.segments, fmt.SEGMENT_INLINE, head.data_size)
    assert pads, "the GRU program has alignment padding between its segments"
    for pos in pads:
        blob = bytearray(image.program)
        blob[pos] = 0x5A
        assert _status(_with_crc(blob)) == INVALID
        assert _status(bytes(blob), verify_checksum=False) == INVALID
    if head.fb_offset + head.fb_size < head.data_offset:  # between the flatbuffer and the data
        blob = bytearray(image.program)
        blob[head.data_offset - 1] = 1
        assert _status(_with_crc(blob)) == INVALID
    # The external weights: padding in the weights file, its own CRC made consistent.
    ext = program_from(models("gru", "int8"), external_weights=True)
    assert ext.weights is not None
    wh = fmt.read_header(ext.weights)
    pads = _padding_positions(wh.data_offset, ext.segments, fmt.SEGMENT_EXTERNAL, wh.data_size)
    assert pads
    weights = bytearray(ext.weights)
    weights[pads[0]] = 0x01
    status = _status(ext.program, weights=_with_crc(weights))
    assert status == INVALID


def test_unknown_header_flags_are_refused(models) -> None:
    image = program_from(models("mlp", "int8"), external_weights=True)
    assert image.weights is not None
    assert _status(image.program, weights=image.weights) == 0
    for bit in (1, 7, 31):
        blob = bytearray(image.program)
        struct.pack_into("<I", blob, 48, struct.unpack_from("<I", blob, 48)[0] | (1 << bit))
        assert _status(_with_crc(blob), weights=image.weights) == INVALID
    weights = bytearray(image.weights)  # a weights file sets no flag
    struct.pack_into("<I", weights, 48, 1)
    assert _status(image.program, weights=_with_crc(weights)) == WEIGHTS_MISMATCH


# --- what the fuzzer found ------------------------------------------------------------------------------

def test_a_nan_activation_into_a_dynamic_int8_linear_is_defined(models, tmp_path) -> None:
    """A NaN reaching the run-time int8 quantization of mcu_linear_w4_s8 (int4-dynamic) was converted to an
    integer (undefined behaviour, UBSan under libFuzzer). Its bundled input set to NaN: clean under the
    sanitizers, and the program runs."""
    image = program_from(models("int4", "int4-dynamic"), bundle=True)
    seg = next(s for s in image.segments if s.name == "vec:forward/0/in0")
    blob = bytearray(image.program)
    pos = fmt.read_header(image.program).data_offset + seg.offset
    blob[pos:pos + len(seg.data)] = np.full(len(seg.data) // 4, np.nan, np.float32).tobytes()
    blob = bytearray(_with_crc(blob))
    prog = Program.load(bytes(blob))
    prog.methods[0].run_raw(np.full(prog.methods[0].inputs[0].numel, np.nan, np.float32))
    if find_fuzz_clang() is None:
        pytest.skip("no clang with libFuzzer for the UBSan build (sudo apt-get install clang-14 "
                    "libclang-rt-14-dev); the run itself was checked above")
    (tmp_path / "nan.mpk").write_bytes(blob)
    code, log = run_inputs(cached_fuzzer(), [tmp_path / "nan.mpk"])
    assert code == 0 and "runtime error" not in log, log[-3000:]
