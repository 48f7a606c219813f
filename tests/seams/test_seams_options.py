"""The Python API takes ``weights_in`` and ``bias_correction`` as the CLI means them: a bad value is an McuError
naming the value, raised before capture and quantization; the string "off" is not taken for True."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from cli_runner import mcu_in_process

import mcu
import mcu.api
from mcu.errors import McuError
from mcu.plan.prefix import KIND as PREFIX_KIND
from mcu.quantize.modes import MixedOptions, corrects_biases


@pytest.mark.parametrize("value", ["off", "on", 1, 0])
def test_bias_correction_takes_a_bool_only(value: object) -> None:
    with pytest.raises(McuError, match="bias_correction must be True, False or None"):
        corrects_biases("w8a16", value)  # type: ignore[arg-type]


def test_bias_correction_bools_and_default() -> None:
    assert corrects_biases("w8a16", None) and not corrects_biases("int8", None)
    assert not corrects_biases("w8a16", False) and corrects_biases("int8", True)


def test_compile_refuses_the_string_off() -> None:
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    data = [(torch.randn(1, 4),) for _ in range(4)]
    with pytest.raises(McuError, match="got 'off'"):
        mcu.compile(model, data[0], quantize="w8a16", calibration=data, bias_correction="off")  # type: ignore[arg-type]


def test_bad_weights_in_fails_before_quantizing(monkeypatch: pytest.MonkeyPatch) -> None:
    def lowered(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("quantized before checking weights_in")

    monkeypatch.setattr(mcu.api, "lower_spec", lowered)
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    data = [(torch.randn(1, 4),) for _ in range(4)]
    with pytest.raises(McuError, match="weights_in must be one of flash, fast, got 'ram'"):
        mcu.compile(model, data[0], quantize="int8", calibration=data, weights_in="ram")


@pytest.mark.parametrize(("fmt", "needle"), [("program", "a program file holds none of that"),
                                             ("c", "MCU_WEIGHTS_SECTION")])
def test_export_refuses_weights_in_fast_for_what_it_writes(tmp_path: Path, fmt: str, needle: str) -> None:
    """A program file is told apart from a C library: the library's hint (a linker section) means nothing for it."""
    model = tmp_path / "m.py"
    model.write_text("import torch\nfrom torch import nn\nmodel = nn.Sequential(nn.Linear(4, 2))\n"
                     "example_inputs = (torch.randn(1, 4),)\n")
    proc = mcu_in_process("export", str(model), "--board", "mps3-an547", "--weights-in", "fast", "--format", fmt,
                          "-o", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcu: error:") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_stream_prefix_help_matches_what_program_files_carry() -> None:
    """A streamed prefix goes into program files too (mcu/program/prefix.py): the help must not send users
    of --program away from --stream-prefix."""
    from mcu.commands.cli import build_parser

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, stride=2, padding=1),
                          nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2)).eval()
    data = [(torch.randn(1, 1, 16, 16),) for _ in range(4)]
    spec = mcu.api.spec_from_objects(model, data[0], data, None, name="streamed")
    cm = mcu.api.compile_spec(spec, "mps2-an505", "int8", stream_prefix=True)
    assert any(op.kind == PREFIX_KIND for op in cm.graph.ops)
    assert cm.program_image().program  # not refused
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[union-attr]
    helps = {a.dest: a.help or "" for a in run._actions}
    assert "generated C only" not in helps["stream_prefix"] and "program files" in helps["stream_prefix"]


def _conv_model() -> tuple[nn.Module, tuple[torch.Tensor], list[tuple[torch.Tensor]]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 8 * 8, 4)).eval()
    data = [(torch.randn(1, 4, 8, 8),) for _ in range(4)]
    return model, data[0], data


def _linear_model() -> tuple[nn.Module, tuple[torch.Tensor], list[tuple[torch.Tensor]]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    data = [(torch.randn(1, 32),) for _ in range(4)]
    return model, data[0], data


@pytest.mark.parametrize(("build", "board", "quantize", "why"), [
    (_conv_model, "mps2-an505", "none", "no convolution or linear layer has int8 weights"),
    (_conv_model, "mps2-an505", "int8", None),  # the compact kernels
    (_conv_model, "mps2-an505", "w8a16", None),  # the portable 16x8 kernels instead of the packed ones
    (_conv_model, "mps2-an385-m0plus", "int8", "has no DSP extension"),
    (_conv_model, "mps2-an385-m0plus", "w4a8", None),  # the 4-bit convolution's own loops, not the stream
    (_linear_model, "mps2-an505", "w4a8", "no layer would run a packed kernel"),
    (_linear_model, "mps2-an505", "mixed", "its objective is flash"),
])
def test_compact_weights_says_when_it_changes_nothing(build, board: str, quantize: str, why: str | None) -> None:
    """What unchanged_by_compact reads off the graph agrees with the builds: where it names a reason, the library
    built without the flag is the same; where it says None, it differs."""
    from mcu.backends.optimized.compact import unchanged_by_compact

    model, example, data = build()
    mixed = MixedOptions(3.0) if quantize == "mixed" else None
    compiled = {packed: mcu.compile(model, example, board=board, quantize=quantize, calibration=data,
                                    packed_weights=packed, mixed=mixed) for packed in (None, False)}
    said = unchanged_by_compact(compiled[False].graph, compiled[False].board)
    assert said is None if why is None else why in said
    built = {packed: (sorted(cm.library.kernel_sources), cm.library.defines, cm.library.files)
             for packed, cm in compiled.items()}
    assert (built[None] == built[False]) == (why is not None)


def test_compact_weights_note_on_the_command_line(tmp_path: Path) -> None:
    """A --compact-weights that changes nothing is accepted with one note line on stderr, and with --json in the
    report's notes: an fp32 C library, an int8 program file."""
    model = tmp_path / "m.py"
    model.write_text("import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
                     "model = nn.Sequential(nn.Linear(4, 2)).eval()\nexample_inputs = (torch.randn(1, 4),)\n"
                     "calibration = [(torch.randn(1, 4),) for _ in range(4)]\n")
    common = ("export", str(model), "--board", "mps2-an505", "--compact-weights")
    text = mcu_in_process(*common, "-q", "none", "-o", str(tmp_path / "out"))
    assert text.returncode == 0, text.stderr
    notes = [ln for ln in text.stderr.splitlines() if ln.startswith("mcu: note:")]
    assert notes == ["mcu: note: --compact-weights changes nothing here: no convolution or linear layer has int8 "
                     "weights and integer activations"], text.stderr
    js = mcu_in_process(*common, "-q", "int8", "--format", "program", "-o", str(tmp_path / "m.mpk"), "--json")
    assert js.returncode == 0 and "mcu: note:" not in js.stderr, js.stderr
    report = json.loads(js.stdout.strip().splitlines()[-1])
    assert len(report["notes"]) == 1 and "a program file runs the interpreter" in report["notes"][0]
