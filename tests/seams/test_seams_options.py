"""The Python API takes ``weights_in`` and ``bias_correction`` as the CLI means them: a bad value is an McuError
naming the value, raised before capture and quantization; the string "off" is not taken for True."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from cli_runner import mcu_in_process

import mcu
import mcu.api
from mcu.errors import McuError
from mcu.plan.prefix import KIND as PREFIX_KIND
from mcu.quantize.modes import corrects_biases


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
