"""bench/cycles.py's published figures and goal line: the MLPerf Tiny anchors as the published logs give them
(cycles = clock / median throughput of each performance log), and a goal that is met only when every
benchmark's estimate is below its anchor. Nothing is simulated here: the tables read measurement files."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cycles():
    spec = importlib.util.spec_from_file_location("bench_cycles", ROOT / "bench" / "cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize("core, quoted", [
    ("cortex-m33", {"KWS": 4.64, "VWW": 9.48, "IC": 16.69, "AD": 0.495}),
    ("cortex-m4", {"KWS": 5.18, "VWW": 10.67, "IC": 19.82, "AD": 0.486}),
    ("cortex-m85", {"KWS": 1.66, "VWW": 6.43, "IC": 4.07, "AD": 0.255}),
])
def test_best_published_cycles(cycles, core, quoted) -> None:
    for benchmark, millions in quoted.items():
        p = cycles.best(benchmark, core)
        assert p is not None, (benchmark, core)
        digits = len(str(millions).split(".")[1])
        assert round(p.cycles / 1e6, digits) == millions, (benchmark, core, p.cycles)


def write(results: Path, model: str, board: str, ours_cycles: int) -> None:
    f = {"instructions": ours_cycles, "cycles": ours_cycles, "cpi": 1.0, "ms": 1.0}
    entry = {"model": model, "board": board, "clock_hz": 160_000_000, "ours": f,
             "cmsis_nn": {**f, "ops_on_cmsis_nn": 1, "ops": 1}}
    (results / f"{model}.{board}.json").write_text(json.dumps(entry))


def test_goal_line(cycles, tmp_path, capsys) -> None:
    board = "mps2-an505-u575"
    below = {"ds_cnn": 4_000_000, "mobilenet_v1": 9_000_000, "resnet8": 16_000_000, "fc_autoencoder": 490_000}
    for model, n in below.items():
        write(tmp_path, model, board, n)
    cycles.goal_line(tmp_path, cycles.MODELS, board, markdown=False)
    out = capsys.readouterr().out
    assert "MET" in out and "NOT MET" not in out and "AD 0.49 M < 0.495 M" in out
    assert "weights in flash (default)" in out  # the goal is judged per placement: each line names its own
    cycles.goal_line(tmp_path, cycles.MODELS, board, markdown=False, weights_in="fast")
    out = capsys.readouterr().out
    assert "--weights-in fast" in out and "flash" not in out

    write(tmp_path, "fc_autoencoder", board, 500_000)  # one benchmark above its anchor
    cycles.goal_line(tmp_path, cycles.MODELS, board, markdown=False)
    out = capsys.readouterr().out
    assert "NOT MET" in out and "AD 0.50 M >= 0.495 M" in out

    (tmp_path / f"resnet8.{board}.json").unlink()  # an unmeasured benchmark is not a met goal
    cycles.goal_line(tmp_path, cycles.MODELS, board, markdown=False)
    assert "NOT MET" in capsys.readouterr().out


def test_l4r5_row_against_the_cortex_m4_best(cycles, tmp_path, capsys) -> None:
    """The STM32L4R5 board's table carries the Cortex-M4 MLPerf Tiny best beside ours, and the calibration
    reads the L4R5 anchors' prediction from it."""
    board = "mps2-an386-l4r5"
    assert board in cycles.BOARDS and cycles.CALIBRATION_BOARDS["cortex-m4"] == ["mps2-an386", board]
    write(tmp_path, "ds_cnn", board, 6_000_000)
    cycles.per_core_tables(tmp_path, ["ds_cnn"], [board], markdown=False)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("ds_cnn (KWS)"))
    assert "5,182,466 (STMicroelectronics, v1.2)" in row and row.split()[-1] == f"{6_000_000 / 5_182_466:.2f}"
    cycles.calibration_table(tmp_path, markdown=False)
    out = capsys.readouterr().out
    krai_kws = next(line for line in out.splitlines() if "NUCLEO-L4R5ZI" in line and " KWS " in line)
    assert f"6,000,000 ({board})" in krai_kws and krai_kws.split()[-1] == f"{6_000_000 / 11_977_243:.2f}"
