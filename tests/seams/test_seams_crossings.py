"""Session 13's features where they meet the rest: the w8a16 GRU and LSTM in the profiler's MAC count, the w8a16
refusal of an attention layer naming the user's line, --cmsis-nn with program files refused by every command
that takes --program, and a C library exported with CMSIS-NN kernels (4-bit ones included) compiling with only
the headers it ships."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import mcu
from cli_runner import mcu_in_process
from repo import requires_qemu
from mcu.backends.cmsis_nn import core as cmsis_nn
from mcu.capture.loader import load_model_file
from mcu.commands.export import export_target
from mcu.devtools.ops import op_macs
from mcu.errors import McuError

from test_seams_errors import HEAD, MLP, TOO_BIG, _json_failure, _one_line_exit2, _write

REAL = os.environ.get("CMSIS_NN_PATH")
needs_real = pytest.mark.skipif(not REAL or not cmsis_nn.is_tree(Path(REAL or ".")),
                                reason=f"{cmsis_nn.ENV_VAR} does not name a CMSIS-NN source tree")
requires_cross = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                                    reason="needs arm-none-eabi-gcc (run scripts/setup)")


class GruFromState(nn.Module):
    """A classifier on an nn.GRU run from a given state, batch_first (its w8a16 op is mcu_gru_s16)."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(7, 13, batch_first=True)
        self.head = nn.Linear(13, 5)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(x, h0)
        return self.head(y[:, -1])


class LstmHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0][:, -1])


def test_recurrent_ops_count_their_multiply_accumulates() -> None:
    """`mcu profile` showed 0 MACs (and no instructions per MAC) for every GRU and LSTM op."""
    torch.manual_seed(0)
    x, h = torch.randn(1, 9, 7), torch.randn(1, 1, 13) * 0.5
    cm = mcu.compile(GruFromState().eval(), (x, h), quantize="w8a16", calibration=[(x, h)])
    (gru,) = [op for op in cm.graph.ops if op.kind == "gru"]
    assert op_macs(gru) == 9 * 3 * 13 * (7 + 13)
    x = torch.randn(1, 5, 4)
    cm = mcu.compile(LstmHead().eval(), (x,), quantize="int8", calibration=[(x,)])
    (lstm,) = [op for op in cm.graph.ops if op.kind == "lstm"]
    assert op_macs(lstm) == 5 * 4 * 6 * (4 + 6)


class Attention(nn.Module):
    """Attention with a padding mask given as an input: no constant for the masked 16x8 softmax to fold
    (a constant mask runs at w8a16)."""

    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(12, 3, batch_first=True)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, key_padding_mask=padding)[0]


def test_w8a16_refusal_of_attention_names_the_users_line_and_module() -> None:
    x, padding = torch.randn(1, 5, 12), torch.tensor([[False, False, False, True, True]])
    with pytest.raises(McuError) as err:
        mcu.compile(Attention().eval(), (x, padding), quantize="w8a16", calibration=[(x, padding)])
    message = str(err.value)
    assert "w8a16 has no 16x8 kernel for: " in message and "masked_fill" in message and "\n" not in message
    assert "the first at test_seams_crossings.py:" in message and "`return self.mha(x, x, x, key_padding_mask=padding)[0]`" \
        in message
    assert "nn.MultiheadAttention" in message


@pytest.mark.parametrize("argv", [["run", "--board", "mps2-an505", "--program"],
                                  ["profile", "--board", "mps2-an505", "--program"],
                                  ["export", "--format", "program", "-o", "m.mpk"]])
def test_program_files_refuse_cmsis_nn_in_every_command(tmp_path: Path, argv: list[str]) -> None:
    """`mcu run --program --cmsis-nn` ran mcu's kernels and reported them as a CMSIS-NN build."""
    model = _write(tmp_path, "mlp", MLP)
    args = [*argv, "--cmsis-nn", str(tmp_path), str(model)]
    flag = "--format program" if argv[0] == "export" else "--program"
    _one_line_exit2(mcu_in_process(*args), "--cmsis-nn applies to generated C", f"drop {flag}")
    _json_failure(mcu_in_process(*args, "--json"), "program files run mcu's own kernels")


class OddConvs(nn.Module):
    """Odd channel counts: the 4-bit convolutions go to arm_convolve_wrapper_s4, the odd-channel depthwise to ours."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 7, 3, padding=1), nn.ReLU(), nn.Conv2d(7, 7, 3, padding=1, groups=7),
                                  nn.ReLU(), nn.Conv2d(7, 13, 1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@needs_real
@requires_cross
def test_exported_cmsis_nn_library_compiles_with_only_its_own_headers(tmp_path: Path) -> None:
    """The exported folder shipped CMSIS-NN's sources but not arm_nnfunctions.h and the headers it includes."""
    from mcu.device.toolchain import find_cross_compiler

    torch.manual_seed(6)
    x = torch.randn(1, 3, 9, 9)
    cm = mcu.compile(OddConvs().eval(), (x,), quantize="w4a8", calibration=[(x,)], cmsis_nn=REAL)
    functions = {op.attrs["cmsis_nn"]["function"] for op in cm.graph.ops if op.attrs.get("backend") == "cmsis-nn"}
    assert "arm_convolve_wrapper_s4" in functions, functions
    root = tmp_path / "lib"
    export_target(cm, "cmake", root)
    assert (root / "include" / "arm_nnfunctions.h").is_file()
    assert (root / "include" / "Internal" / "arm_nn_compiler.h").is_file()
    gcc = str(find_cross_compiler())
    flags = [*cm.board.cpu_flags, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{root}",
             f"-I{root / 'include'}", *(f"-D{k}={v}" for k, v in cm.library.defines.items())]
    sources = sorted(root.rglob("arm_*.c"))
    assert sources
    for i, src in enumerate(sources):
        subprocess.run([gcc, *flags, "-c", str(src), "-o", str(tmp_path / f"{i}.o")], check=True)


class CellLoopDict(nn.Module):
    """A GRUCell stepped in a Python loop, returning a dict (w8a16: one mcu_gru_s16 op a step)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(5, 11)
        self.out = nn.Linear(11, 3)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = torch.zeros(1, 11)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return {"logits": self.out(h), "state": h}


def test_debug_reference_computes_every_w8a16_op() -> None:
    """`mcu debug` refused every w8a16 model ("the integer reference cannot predict gru ..."): its per-op
    reference knew only int8 ops. Each op's output is now the reference's, up to the model's outputs."""
    from mcu.devtools.debug import reference_per_op

    torch.manual_seed(4)
    x = torch.randn(1, 4, 5)
    cm = mcu.compile(CellLoopDict().eval(), (x,), quantize="w8a16", calibration=[(x,)], test_inputs=[(x,)])
    assert sum(op.kind == "gru" for op in cm.graph.ops) == 4
    outputs, islands = reference_per_op(cm.graph, cm.encode_inputs((x,)))
    assert not islands
    made = {id(op.output.base()): h for h, op in enumerate(cm.graph.ops)}
    for t, want in zip(cm.graph.outputs, cm.reference_raw(x)):
        np.testing.assert_array_equal(outputs[made[id(t.base())]], np.asarray(want).reshape(-1))


def _export_json(*argv: str, env: dict[str, str] | None = None) -> dict:
    proc = mcu_in_process("export", *argv, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


def test_export_json_names_every_file_it_wrote(tmp_path: Path) -> None:
    """`mcu export` had no --json: a script exporting a library learned what it wrote only by parsing a sentence."""
    model = _write(tmp_path, "mlp", MLP)
    out = tmp_path / "lib"
    report = _export_json("--board", "host", str(model), "-o", str(out))
    on_disk = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    assert report["files"] == on_disk and "mlp_model.h" in on_disk
    assert (report["format"], report["target"], report["prefix"], report["quantize"]) == ("c", "cmake", "mlp", "int8")
    assert report["arena_bytes"] > 0 and report["output"] == str(out)
    # a Linux board builds no firmware: no flash figure, and the stack is the process's
    assert report["flash_bytes"] is None and report["model_stack"]["bytes"] is None
    assert "not a bare-metal board" in report["model_stack"]["reason"]
    program = tmp_path / "m.mpk"
    report = _export_json("--format", "program", "--external-weights", "--bundle-tests", "--verify", str(model),
                          "-o", str(program))
    weights = program.with_suffix(".mpw")
    assert report["files"] == [str(program), str(weights)]
    assert (report["program_bytes"], report["weights_bytes"]) == (program.stat().st_size, weights.stat().st_size)
    assert report["methods"] == [{"name": "forward", "arena_bytes": report["methods"][0]["arena_bytes"]}]
    assert report["verified"].endswith("2 bundled vector(s) match")
    # --verify without --bundle-tests said "0 bundled vector(s) match", as if something had been compared
    report = _export_json("--format", "program", "--verify", str(model), "-o", str(program))
    assert report["files"] == [str(program)] and report["weights_bytes"] is None
    assert report["verified"].endswith("no bundled vectors to run (--bundle-tests bundles them)")


def test_export_json_without_the_cross_compiler_still_writes_the_library(tmp_path: Path) -> None:
    """The library needs no compiler; only its stack bound and the firmware's flash figure do, and say why not."""
    model = _write(tmp_path, "mlp", MLP)
    out = tmp_path / "lib"
    report = _export_json("--board", "mps2-an505", str(model), "-o", str(out),
                          env={"MCU_ARM_GCC": str(tmp_path / "no-gcc")})
    assert (out / "mlp_model.h").is_file() and report["flash_bytes"] is None and report["ram_bytes"] is None
    assert report["model_stack"]["bytes"] is None and "arm-none-eabi-gcc not found" in report["model_stack"]["reason"]
    # in text, the header's missing macro is said, not left for the user to find
    proc = mcu_in_process("export", "--board", "mps2-an505", str(model), "-o", str(out),
                          env={"MCU_ARM_GCC": str(tmp_path / "no-gcc")})
    assert proc.returncode == 0 and "no MLP_STACK_BYTES in the header: arm-none-eabi-gcc not found" in proc.stdout


TYPO = MLP.replace("nn.Sequential(", "nn.Sequentail(")
UNSUPPORTED = MLP.replace("nn.ReLU()", "nn.AdaptiveMaxPool1d(16)")


@pytest.mark.parametrize("text, argv, needles", [
    (TYPO, ["--board", "host"], ["at line 4", "Sequentail", "did you mean 'Sequential'?"]),
    (UNSUPPORTED, ["--board", "host"], ["nn.AdaptiveMaxPool1d", "is not supported"]),
    (TOO_BIG, ["--board", "mps2-an505"], ["does not fit mps2-an505", "too many"]),
    (MLP, [], ["mcu export needs --board", "--format program"]),
    (MLP, ["--board", "host", "--cmsis-nn", "/nonexistent/cmsis-nn"], ["/nonexistent/cmsis-nn"]),
], ids=["typo", "unsupported", "too-big", "no-board", "missing-cmsis-nn"])
def test_export_failures_are_json_under_json(tmp_path: Path, text: str, argv: list[str], needles: list[str]) -> None:
    model = _write(tmp_path, "model", text)
    args = ["export", *argv, str(model), "-o", str(tmp_path / "lib")]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)


def test_a_methods_file_that_raises_names_its_line_and_the_closest_name(tmp_path: Path) -> None:
    """A file with `methods` ran without its line (and without its folder on sys.path); a misspelt name now gets
    the name it is closest to, as Python's own traceback would show."""
    model = _write(tmp_path, "two", HEAD + "net = nn.Linear(8, 4)\nmethods = {'forward': net}\n"
                                          "example_inputs = {'forward': (torch.randn(1, 8),)}\nx = nte\n")
    args = ["export", "--format", "program", str(model), "-o", str(tmp_path / "two.mpk")]
    needles = ["two.py at line 7", "NameError", "did you mean 'net'?"]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)


def test_compile_under_warnings_as_errors() -> None:
    """torch.export's own pytree deprecation reached the user on every mcu.compile (the CLI alone hid it), and a
    test suite with warnings as errors failed the capture with "decomposition to Core ATen failed"."""
    torch.manual_seed(0)
    x = torch.randn(1, 8)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cm = mcu.compile(model, (x,), quantize="int8", calibration=[(x,)])
    np.testing.assert_array_equal(cm.run(x, raw=True)[0].numpy(), cm.raw_outputs(cm.reference_raw(x))[0])


CELLS_FROM_ZEROS = HEAD + """class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRUCell(6, 12)
        self.lstm = nn.LSTMCell(12, 10)
        self.out = nn.Linear(10, 2)

    def forward(self, x):
        h = torch.zeros(1, 12)
        h2, c2 = torch.zeros(1, 10), torch.zeros(1, 10)
        for t in range(x.shape[1]):
            h = self.gru(x[:, t, :], h)
            h2, c2 = self.lstm(h, (h2, c2))
        return self.out(h2)


model = Tracker().eval()
example_inputs = (torch.randn(1, 5, 6),)
calibration = [(torch.randn(1, 5, 6),) for _ in range(8)]
test_inputs = [(torch.randn(1, 5, 6),) for _ in range(2)]
"""


def test_w8a16_lstm_cell_from_zero_states(tmp_path: Path) -> None:
    """w8a16 refused an LSTMCell stepped from zero states, naming `torch.zeros` as the op without a 16x8 kernel
    (zeros passed only into recurrent layers and GRU cells); the cell's linear layers, gates and adds all have one."""
    model = _write(tmp_path, "cells", CELLS_FROM_ZEROS)
    proc = mcu_in_process("run", "--board", "host", "-q", "w8a16", "--json", str(model))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] and report["max_error_vs_expected"] == 0 and not report["fp32_fallbacks"]
    assert report["max_abs_error_vs_eager"] < 1e-2


@pytest.mark.parametrize("command", ["build", "run", "profile", "debug", "flash"])
def test_a_missing_board_says_where_the_boards_are(tmp_path: Path, command: str) -> None:
    """A missing --board pointed at the command's whole --help; it now names the flag's form and `mcu boards`."""
    model = _write(tmp_path, "mlp", MLP)
    needles = ["--board/-b", "add --board BOARD", "`mcu boards` lists them"]
    _one_line_exit2(mcu_in_process(command, str(model)), *needles)
    if command != "flash":  # flash has no --json
        _json_failure(mcu_in_process(command, str(model), "--json"), *needles)


class WideConvs(nn.Module):
    """Two full-resolution convolutions into a global pool: no inverted-residual block, no prefix to stream."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_an_arena_too_big_for_the_board_is_stated_plainly(quantize: str) -> None:
    """The refusal spoke of a RAM budget the user never gave and of "0 of 0 inverted-residual blocks", and told an
    int8 model to quantize to int8."""
    torch.manual_seed(0)
    x = torch.randn(1, 3, 96, 96)
    with pytest.raises(McuError) as err:
        mcu.compile(WideConvs().eval(), (x,), board="pico", quantize=quantize, calibration=[(x,)])
    message, hint = err.value.message, err.value.hint or ""
    assert re.search(r"does not fit pico \(262144 B of RAM .*\): its arena needs \d+ B \(every tensor whole", message)
    assert "0 of 0" not in message and "RAM budget" not in message
    assert ("quantize to int8" in hint) == (quantize == "none")


@requires_qemu
@pytest.mark.slow
def test_run_program_json_has_the_c_runs_keys_and_outputs(tmp_path: Path) -> None:
    """`mcu run --program --json` had no outputs (nor output_names, errors, partitions): a program file's outputs
    could not be compared with the generated C's. They are the same, code for code."""
    model = _write(tmp_path, "mlp", MLP)
    reports = {}
    for mode in ([], ["--program"]):
        proc = mcu_in_process("run", "--board", "mps2-an505", "--json", *mode, str(model))
        assert proc.returncode == 0, proc.stderr
        reports[bool(mode)] = json.loads(proc.stdout)
    c, program = reports[False], reports[True]
    assert set(c) <= set(program), set(c) - set(program)
    assert program["outputs_raw"] == c["outputs_raw"] and program["outputs"] == c["outputs"]
    assert program["max_error_vs_expected"] == 0 and program["passed"] and program["output_names"] == ["output"]


@pytest.mark.parametrize("old, new, needles", [
    ("calibration = ", "calibraton = ", ["defines `calibraton` but no `calibration`", "rename `calibraton`"]),
    ("test_inputs = ", "test_input = ", ["defines `test_input` but no `test_inputs`", "rename `test_input`"]),
    ("example_inputs = ", "example_input = ", ["defines no `example_inputs` (it defines `example_input`)"]),
], ids=["calibration", "test_inputs", "example_inputs"])
def test_a_misspelt_model_file_name_is_named(tmp_path: Path, old: str, new: str, needles: list[str]) -> None:
    """`calibraton = [...]` was read as no calibration at all: `--quantize auto` built fp32 without a word, and a
    misspelt `test_inputs` bundled example_inputs instead."""
    model = _write(tmp_path, "typo", MLP.replace(old, new))
    args = ["run", "--board", "host", str(model)]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)
    # beside the real names, names that resemble them are the user's own business
    fine = _write(tmp_path, "fine", MLP + f"{new}[1]\ncalibrate = [2]\n")
    assert load_model_file(fine).name == "fine"


def test_debug_of_a_float_model_points_at_the_integer_modes(tmp_path: Path) -> None:
    """The refusal said `mcu debug` compares int8 programs only; w8a16 and w4a8 ones compare too."""
    model = _write(tmp_path, "mlp", MLP)
    args = ["debug", "--board", "mps2-an505", "-q", "none", str(model)]
    needles = ["mlp (none) has no integer reference", "int8, w4a8, w8a16, mixed", "--quantize int8 or w8a16"]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)


@pytest.mark.parametrize("argv, needles", [
    (["--board", "host"], ["and host is not a QEMU board", "pick a QEMU board"]),
    (["--board", "mps2-an505", "--sim", "renode"], ["QEMU, not in Renode", "drop --sim renode"]),
], ids=["linux-board", "renode"])
def test_run_program_where_it_cannot_run(tmp_path: Path, argv: list[str], needles: list[str]) -> None:
    """The refusal read "... in QEMU, which mps2-an505 is not run in" for a QEMU board under --sim renode."""
    model = _write(tmp_path, "mlp", MLP)
    args = ["run", "--program", *argv, str(model)]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)


LLM = Path(__file__).resolve().parents[2] / "examples" / "tiny_llm.py"


@pytest.mark.slow
def test_export_of_a_text_generation_file_writes_its_library(tmp_path: Path) -> None:
    """`mcu export` of tiny_llm.py said it "defines no `example_inputs`": the C export knew single models only,
    though build and run render both methods into one library."""
    out = tmp_path / "lib"
    report = _export_json("--board", "host", str(LLM), "-o", str(out))
    assert {"tiny_llm_model.h", "tiny_llm_prefill_model.h", "tiny_llm_decode_model.h", "CMakeLists.txt"} <= \
        set(report["files"])
    assert report["methods"] == ["decode", "prefill"] and 0 < report["state_bytes"] < report["arena_bytes"]
    assert "tiny_llm_reset_state(void);" in (out / "tiny_llm_model.h").read_text()


def test_export_of_a_text_generation_file_refuses_example_apps(tmp_path: Path) -> None:
    args = ["export", "--board", "pico2", "--target", "zephyr", str(LLM), "-o", str(tmp_path / "z")]
    needles = ["--target zephyr writes an example app", "text-generation file", "--target cmake"]
    _one_line_exit2(mcu_in_process(*args), *needles)
    _json_failure(mcu_in_process(*args, "--json"), *needles)
