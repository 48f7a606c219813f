"""Fuzzing the program loader and interpreter with libFuzzer (clang), AddressSanitizer and UBSan.

``scripts/fuzz_program`` runs it for as long as asked; the tests run it
briefly. The harness is runtime_c/interp/fuzz/fuzz_program.c; the seeds are
real program files written by the compiler: small models (int8 and fp32, two
methods sharing weights, recurrent layers, 4-bit weights, fused blocks as
loops, a streamed prefix with its input streamed, one followed by its external weights file) and, for the long run, every example (custom ops,
tiny_llm's two methods sharing a KV cache, each int8 one also with external
weights).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mcu.device.objcache import Compile, compile_each
from mcu.errors import McuError
from mcu.paths import all_kernel_sources, cache_dir, runtime_dir
from mcu.quantize import modes
from mcu.ir import Graph, Op, Tensor
from mcu.plan.memory import plan_memory
from mcu.program.writer import MethodSource, write_program

CLANG_CANDIDATES = ("clang", "clang-19", "clang-16", "clang-15", "clang-14")
INSTALL_HINT = "install clang and libFuzzer: sudo apt-get install clang-14 libclang-rt-14-dev (Debian bookworm)"
SANITIZERS = "fuzzer,address,undefined"
MAX_LEN = 24576  # bytes: above every small seed (the largest is ~20 KB); run_fuzzer raises it to the largest seed


def find_fuzz_clang() -> Path | None:
    """A clang that links -fsanitize=fuzzer (libFuzzer ships in libclang-rt-<N>-dev on Debian)."""
    for name in ([os.environ["MCU_FUZZ_CC"]] if os.environ.get("MCU_FUZZ_CC") else []) + list(CLANG_CANDIDATES):
        path = shutil.which(name)
        if path is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.c"
            src.write_text("#include <stdint.h>\n#include <stddef.h>\n"
                           "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
            proc = subprocess.run([path, f"-fsanitize={SANITIZERS}", str(src), "-o", str(Path(tmp) / "probe")],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                return Path(path)
    return None


def _fuzzer_sources() -> list[Path]:
    rt = runtime_dir()
    return [rt / "interp" / "fuzz" / "fuzz_program.c", *sorted((rt / "interp").glob("*.c")),
            *all_kernel_sources(), rt / "src" / "mcu_status.c", rt / "src" / "mcu_delegate.c"]


def _fuzzer_flags() -> list[str]:
    # Line tables are all a sanitizer report needs (file:line per frame); full debug info took a
    # third of the build.
    return ["-std=c11", "-gline-tables-only", "-O1", f"-fsanitize={SANITIZERS}", "-fno-sanitize-recover=undefined",
            "-Wall", "-Wextra", "-Werror", f"-I{runtime_dir() / 'include'}"]


def build_fuzzer(out: Path, clang: Path | None = None) -> Path:
    """The instrumented harness binary at ``out``: interpreter, every kernel, the status names (each source
    compiled on its own, in parallel, through the shared object cache)."""
    clang = clang or find_fuzz_clang()
    if clang is None:
        raise McuError("no clang with libFuzzer found", hint=INSTALL_HINT)
    out.parent.mkdir(parents=True, exist_ok=True)

    def run(cmd: list[str], what: Path) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise McuError(f"building the fuzz harness failed ({what.name}):\n{proc.stderr.strip()[-3000:]}")

    flags = _fuzzer_flags()
    with tempfile.TemporaryDirectory(prefix="mcu-fuzz-") as tmp:
        objects = compile_each(clang, [Compile(src, flags, True) for src in _fuzzer_sources()], Path(tmp), run)
        run([str(clang), f"-fsanitize={SANITIZERS}", *map(str, objects), "-lm", "-o", str(out)], out)
    return out


def cached_fuzzer(clang: Path | None = None) -> Path:
    """The harness from the content-keyed build cache (sources, headers, compiler and flags), built once."""
    clang = clang or find_fuzz_clang()
    if clang is None:
        raise McuError("no clang with libFuzzer found", hint=INSTALL_HINT)
    rt = runtime_dir()
    digest = hashlib.sha256(" ".join([str(clang), *_fuzzer_flags(), *map(str, _fuzzer_sources())]).encode())
    for path in sorted([*rt.glob("interp/**/*.[ch]"), *rt.glob("interp/*.def"), *rt.glob("kernels/**/*.[ch]"),
                        *rt.glob("include/**/*.h"), *rt.glob("src/*.c")]):
        digest.update(str(path.relative_to(rt)).encode() + b"\0" + path.read_bytes())
    out = cache_dir() / "fuzz" / digest.hexdigest()[:24] / "fuzz_program"
    if not out.is_file():
        tmp = out.with_name(f"fuzz_program.{os.getpid()}.tmp")
        build_fuzzer(tmp, clang)
        tmp.replace(out)  # atomic: a parallel test sees the whole binary or none
    return out


SEED_MODELS = {
    # name -> model file source; small on purpose (libFuzzer mutates whole files)
    "convs": """
import torch
from torch import nn
torch.manual_seed(3)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.pw = nn.Conv2d(4, 6, 1)
        self.fc = nn.Linear(6, 3)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = nn.functional.max_pool2d(y, 2)
        y = torch.relu(self.pw(torch.relu(self.dw(y)) + y))
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))
model = M().eval()
example_inputs = (torch.randn(1, 2, 8, 8),)
calibration = [(torch.randn(1, 2, 8, 8),) for _ in range(4)]
""",
    "pointwise": """
import torch
from torch import nn
torch.manual_seed(4)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(8 * 2 * 2, 5)
    def forward(self, x):
        y = torch.relu(self.conv(x))
        z = self.bn(y + 0.5)
        y = torch.sigmoid(nn.functional.avg_pool2d(y, 2)) * torch.tanh(nn.functional.max_pool2d(z, 2))
        z = torch.clamp(y - 0.25, -0.5, 0.75)
        w = nn.functional.pad(torch.cat([y, z], dim=1), (1, 1, 1, 1), value=0.25)
        w = nn.functional.max_pool2d(w, 2)
        logits = self.fc(torch.flatten(w.permute(0, 2, 3, 1), 1)) / 2.0
        return torch.softmax(logits, dim=1), w.mean(dim=(2, 3))
model = M().eval()
example_inputs = (torch.randn(1, 3, 6, 6),)
calibration = [(torch.randn(1, 3, 6, 6),) for _ in range(4)]
""",
    "two_methods": """
import torch
from torch import nn
torch.manual_seed(5)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 8)
        self.dec = nn.Linear(8, 16)
    def encode(self, x):
        return torch.relu(self.enc(x))
    def forward(self, x):
        return self.dec(self.encode(x))
model = M().eval()
example_inputs = (torch.randn(1, 16),)
calibration = [(torch.randn(1, 16),) for _ in range(4)]
methods = {"forward": model, "encode": model.encode}
""",
    # normalisation, reductions and int8 activations
    "norm": """
import torch
from torch import nn
torch.manual_seed(7)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.ln, self.rms, self.b = nn.Linear(8, 8), nn.LayerNorm(8), nn.RMSNorm(8), nn.Linear(8, 4)
        self.gn, self.prelu = nn.GroupNorm(2, 4), nn.PReLU(4)
    def forward(self, x):
        h = nn.functional.gelu(self.ln(self.a(x)))
        s = torch.softmax(h @ self.rms(h).transpose(-1, -2) * 0.3, dim=-1) @ h
        y = self.b(s)
        g = self.prelu(self.gn(y.transpose(1, 2)))
        return y.sum(dim=(0, 2)), g.var(dim=-1), nn.functional.log_softmax(y, dim=-1), y.argmax(dim=-1)
model = M().eval()
example_inputs = (torch.randn(2, 3, 8),)
calibration = [(torch.randn(2, 3, 8),) for _ in range(4)]
""",
    # the integer recurrent kernels (each with its per-row constants and sigmoid table)
    "recurrent": """
import torch
from torch import nn
torch.manual_seed(8)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru, self.lstm, self.fc = nn.GRU(3, 4, batch_first=True), nn.LSTM(4, 4, batch_first=True), nn.Linear(4, 2)
    def forward(self, x):
        y, _ = self.gru(x)
        y, _ = self.lstm(y)
        return self.fc(y[:, -1])
model = M().eval()
example_inputs = (torch.randn(1, 3, 3),)
calibration = [(torch.randn(1, 3, 3),) for _ in range(4)]
""",
    # the 16x8 LSTM of w8a16 (its int64 biases and per-row 16x8 multipliers), time first
    "lstm16": """
import torch
from torch import nn
torch.manual_seed(12)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.fc = nn.LSTM(3, 5, num_layers=2), nn.Linear(5, 2)
    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[-1])
model = M().eval()
example_inputs = (torch.randn(4, 1, 3),)
calibration = [(torch.randn(4, 1, 3),) for _ in range(4)]
""",
    # w8a16's transposed convolution and quotient (mcu_conv_transpose2d_s16, mcu_div_s16: its fractional bits)
    "convt_div16": """
import torch
from torch import nn
torch.manual_seed(13)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
        self.a, self.b = nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1)
    def forward(self, x):
        y = torch.relu(self.up(x))
        return self.a(y) / (self.b(y).abs() + 1.0)
model = M().eval()
example_inputs = (torch.randn(1, 2, 3, 3),)
calibration = [(torch.randn(1, 2, 3, 3),) for _ in range(4)]
""",
    # 4-bit groupwise linear weights (int4-weight, int4-dynamic)
    "int4": """
import torch
from torch import nn
torch.manual_seed(9)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
example_inputs = (torch.randn(1, 64),)
calibration = [(torch.randn(1, 64),) for _ in range(4)]
""",
    # fused blocks, each a LOOP with fills, moves and strided calls: an inverted residual with its residual
    # (a band of 2 rows: a shorter last band) and a ResNet downsampling block (a 1x1 strided shortcut)
    "fused": """
import torch
from torch import nn
torch.manual_seed(10)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.e, self.d, self.p = nn.Conv2d(4, 12, 1), nn.Conv2d(12, 12, 3, padding=1, groups=12), nn.Conv2d(12, 4, 1)
        self.c1, self.c2, self.sc = nn.Conv2d(4, 8, 3, 2, 1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(4, 8, 1, 2)
    def forward(self, x):
        x = x + self.p(torch.relu(self.d(torch.relu(self.e(x)))))
        return torch.relu(self.c2(torch.relu(self.c1(x))) + self.sc(x))
model = M().eval()
example_inputs = (torch.randn(1, 4, 7, 6),)
calibration = [(torch.randn(1, 4, 7, 6),) for _ in range(4)]
""",
    # a streamed prefix with its input streamed: one ROWS instruction over its table of steps, rings and row
    # calls (a strided stem, a depthwise written into the pointwise's rows, a residual add)
    "streamed": """
import torch
from torch import nn
torch.manual_seed(11)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.s, self.d, self.p = nn.Conv2d(3, 6, 3, 2, 1), nn.Conv2d(6, 6, 3, padding=1, groups=6), nn.Conv2d(6, 8, 1)
        self.r = nn.Conv2d(8, 8, 3, padding=1, groups=8)
    def forward(self, x):
        x = torch.relu(self.p(torch.relu(self.d(torch.relu(self.s(x))))))
        return x + torch.relu(self.r(x))
model = M().eval()
example_inputs = (torch.randn(1, 3, 9, 5),)
calibration = [(torch.randn(1, 3, 9, 5),) for _ in range(4)]
""",
}
# Quantizations of each seed model (default: fp32 and int8).
SEED_QUANTIZE = {"int4": (modes.INT4_WEIGHT, modes.INT4_DYNAMIC), "recurrent": (modes.INT8,), "lstm16": (modes.W8A16,),
                 "convt_div16": (modes.W8A16,)}
# Seed models compiled with every fusable block fused, and the output rows of each pass.
SEED_FUSE = {"fused": 2}
# Seed models compiled with their first ops streamed and the input read by rows.
SEED_STREAM = ("streamed",)
# Quantizations of each example, and the files of examples/ that are no model.
EXAMPLE_QUANTIZE = {"tiny_llm": (modes.INT4_WEIGHT,)}  # as its README section and tests build it
NOT_EXAMPLES = {"_init", "tiny_llm_model", "tiny_llm_train"}
# An example seed above this is left out (named): the fp32 MobileNets run for seconds per input under ASan,
# which would starve the fuzzer; their int8 programs stay.
MAX_EXAMPLE_SEED = 1 << 20


def _write_model_seeds(path: Path, name: str, quantizations: tuple[str, ...], seed_dir: Path,
                       external: bool) -> list[Path]:
    # lazy: keeps torch and jinja2 out of this module's import
    from mcu.api import compile_spec
    from mcu.program.methods import compile_methods
    from mcu.program.writer import program_from

    written = []
    band = SEED_FUSE.get(name)
    for quantize in quantizations:
        if name in SEED_STREAM:
            methods = compile_methods(path, quantize=quantize, compile_spec=lambda spec, board, q: compile_spec(
                spec, board, q, check_flash=False, stream_input=True))
        elif band is None:
            methods = compile_methods(path, quantize=quantize)
        else:
            methods = compile_methods(path, quantize=quantize, compile_spec=lambda spec, board, q: compile_spec(
                spec, board, q, check_flash=False, fuse_blocks="all", fuse_band=band))
        image = program_from(methods, bundle=True)
        out = seed_dir / f"{name}-{quantize}.mpk"
        out.write_bytes(image.program)
        written.append(out)
        if external:
            ext = program_from(methods, external_weights=True)
            assert ext.weights is not None
            out = seed_dir / f"{name}-{quantize}-external.mpk"
            out.write_bytes(ext.program + ext.weights)  # the harness splits at the declared size
            written.append(out)
    return written


def write_seeds(seed_dir: Path, models: tuple[str, ...] | None = None) -> list[Path]:
    """Real program files: each seed model (fp32 and int8, or as SEED_QUANTIZE says) with bundled vectors,
    the small convolutions also with external weights. ``models``: only these of SEED_MODELS (and no
    delegate seed)."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in SEED_MODELS.items():
            if models is not None and name not in models:
                continue
            path = Path(tmp) / f"{name}.py"
            path.write_text(source)
            written += _write_model_seeds(path, name, SEED_QUANTIZE.get(name, (modes.NONE, modes.INT8)), seed_dir,
                                          external=name == "convs")
    if models is None:
        out = seed_dir / "delegate.mpk"
        out.write_bytes(_delegate_seed())
        written.append(out)
    return written


def write_example_seeds(seed_dir: Path, examples: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Every example of ``examples`` as program files: fp32 and int8 with bundled vectors (tiny_llm, two
    methods sharing weights and state: 4-bit weights), each quantized one also followed by its external
    weights file. Generated, not committed: the largest are up to 2 MB. An example the program format
    cannot hold is named through ``log``."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(examples.glob("*.py")):
        if path.stem in NOT_EXAMPLES:
            continue
        for quantize in EXAMPLE_QUANTIZE.get(path.stem, (modes.NONE, modes.INT8)):
            try:
                files = _write_model_seeds(path, path.stem, (quantize,), seed_dir, external=not modes.is_float(quantize))
            except McuError as exc:  # an example the program format cannot hold is reported, never hidden
                log(f"fuzz seeds: {path.name} at {quantize}: no program file ({exc})")
                continue
            for f in files:
                size = f.stat().st_size
                if size > MAX_EXAMPLE_SEED:
                    f.unlink()
                    log(f"fuzz seeds: {f.name} left out: {size} B is above {MAX_EXAMPLE_SEED} B")
                else:
                    written.append(f)
                    log(f"fuzz seeds: {path.name} at {quantize}: {f.name} {size} B")
    return written


def _delegate_seed() -> bytes:
    """A method that is one delegated partition for the harness's "fuzz.copy" backend."""
    x = Tensor("x", (1, 16), "float32", is_input=True)
    y = Tensor("y", (1, 16), "float32", is_output=True)
    payload = b"FUZZ" + (1).to_bytes(4, "little") + bytes(range(24))  # the registry checks magic and version
    op = Op("delegate", [x], [y], {"backend": "fuzz.copy", "version": 1, "payload": payload, "ops": []}, "partition")
    graph = Graph([x], [y], [op], name="delegated")
    return write_program([MethodSource("forward", graph, plan_memory(graph))]).program


@dataclass
class FuzzRun:
    returncode: int
    executions: int
    corpus_files: int
    corpus_bytes: int
    seconds: float
    log: str
    coverage: int = 0  # libFuzzer's last "cov:" (code edges covered) and "ft:" (features)
    features: int = 0

    @property
    def clean(self) -> bool:
        """No crash, leak, sanitizer report or timeout."""
        bad = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "ERROR: libFuzzer",
               "deadly signal", "SUMMARY:")
        return self.returncode == 0 and not any(b in self.log for b in bad)


def run_fuzzer(binary: Path, corpus: Path, seconds: int, seeds: Path | None = None, jobs: int = 1,
               artifacts: Path | None = None, timeout_s: int = 10) -> FuzzRun:
    """Fuzz for ``seconds`` (libFuzzer's -max_total_time), growing ``corpus`` (seeded from ``seeds``)."""
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = artifacts or corpus.parent / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    largest = max([p.stat().st_size for p in seeds.iterdir() if p.is_file()] if seeds else [], default=0)
    cmd = [str(binary), str(corpus), *([str(seeds)] if seeds else []), f"-max_total_time={seconds}",
           f"-max_len={max(MAX_LEN, largest)}", f"-timeout={timeout_s}", "-rss_limit_mb=4096", "-print_final_stats=1",
           f"-artifact_prefix={artifacts}/"]
    if jobs > 1:
        cmd += [f"-fork={jobs}", "-ignore_crashes=0"]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds + 300)
    log = proc.stdout + proc.stderr
    files = [p for p in corpus.iterdir() if p.is_file()]
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    return FuzzRun(returncode=proc.returncode, executions=_executions(log), corpus_files=len(files),
                   corpus_bytes=sum(p.stat().st_size for p in files), seconds=seconds, log=log,
                   coverage=int(cov[-1][0]) if cov else 0, features=int(cov[-1][1]) if cov else 0)


def run_inputs(binary: Path, inputs: list[Path]) -> tuple[int, str]:
    """Each input through the harness once (no fuzzing): its exit status and log; nonzero on any finding."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    proc = subprocess.run([str(binary), *map(str, inputs)], capture_output=True, text=True, env=env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def _executions(log: str) -> int:
    """Total executions from libFuzzer's final stats (or the last status line)."""
    m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    if m:
        return sum(int(x) for x in m) if len(m) > 1 and "fork" in log else int(m[-1])
    lines = re.findall(r"#(\d+)\s+(?:DONE|pulse|NEW|REDUCE|INITED)", log)
    return int(lines[-1]) if lines else 0
