"""`mcu ci --renode`: the GitHub Actions workflow is valid YAML with every step a user needs, and the Robot
files beside it are the ones `mcu run --sim renode` renders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from mcu.device.boards import load_board
from mcu.commands.ci import RENODE_VERSION, WORKFLOW, CiRequest, write_renode_ci
from mcu.errors import McuError
from mcu.device.sim.renode import render_renode_files


MCU_URL = "https://example.org/mcu.git"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    from repo import EXAMPLES

    (tmp_path / "models").mkdir()
    for name in ("small_cnn", "ds_cnn"):
        shutil.copyfile(EXAMPLES / f"{name}.py", tmp_path / "models" / f"{name}.py")
    return tmp_path


def _write(repo: Path, boards: list[str]) -> list[Path]:
    return write_renode_ci(CiRequest(models=["models/small_cnn.py", "models/ds_cnn.py"], boards=boards,
                                     out_dir=repo, mcu_source=MCU_URL))


def test_workflow_is_valid_yaml_with_the_steps_a_user_needs(repo: Path) -> None:
    _write(repo, ["mps2-an505", "mps2-an386"])
    wf = yaml.safe_load((repo / WORKFLOW).read_text())
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    assert {"push", "pull_request"} <= set(triggers)
    job = wf["jobs"]["renode"]
    assert job["strategy"]["matrix"] == {"model": ["models/small_cnn.py", "models/ds_cnn.py"],
                                         "board": ["mps2-an505", "mps2-an386"]}
    steps = job["steps"]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses[0].startswith("actions/checkout@") and any(u.startswith("actions/setup-python@") for u in uses)
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "gcc-arm-none-eabi" in runs and "libnewlib-arm-none-eabi" in runs
    assert "github.com/renode/renode/releases/download/v${RENODE_VERSION}" in runs
    assert wf["env"]["RENODE_VERSION"] == RENODE_VERSION
    assert "tests/requirements.txt" in runs and "$GITHUB_PATH" in runs  # renode-test and its Robot Framework
    assert 'pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu' in runs
    assert f'pip install -q "git+{MCU_URL}"' in runs and "pip install mcu" not in runs
    last = steps[-1]["run"]
    assert last == 'mcu run --sim renode --board "${{ matrix.board }}" "${{ matrix.model }}"'


def test_robot_files_are_the_ones_mcu_run_generates(repo: Path, tmp_path_factory) -> None:
    written = _write(repo, ["mps2-an505", "mps2-an386"])
    for board in ("mps2-an505", "mps2-an386"):
        ref = render_renode_files(load_board(board), tmp_path_factory.mktemp(board), repl_path=f"$ORIGIN/{board}.repl")
        for generated in (ref.robot, ref.repl, ref.resc):
            committed = repo / "renode" / generated.name
            assert committed in written
            assert committed.read_text() == generated.read_text()
        robot = (repo / "renode" / f"{board}.robot").read_text()
        assert "Wait For Line On Uart     RESULT PASS" in robot


def test_board_without_renode_platform_and_missing_model_are_errors(repo: Path) -> None:
    with pytest.raises(McuError, match="no Renode platform"):
        _write(repo, ["pico2"])
    with pytest.raises(McuError, match="does not exist"):
        write_renode_ci(CiRequest(models=["models/nope.py"], boards=["mps2-an505"], out_dir=repo, mcu_source=MCU_URL))


def test_cli_ci_renode(repo: Path) -> None:
    from cli_runner import mcu_in_process

    proc = mcu_in_process("ci", "--renode", "models/small_cnn.py", "-o", str(repo), "--mcu-source", MCU_URL)
    assert proc.returncode == 0, proc.stderr
    wf = yaml.safe_load((repo / WORKFLOW).read_text())
    assert wf["jobs"]["renode"]["strategy"]["matrix"]["board"] == ["mps2-an505"]
    assert (repo / "renode" / "mps2-an505.robot").is_file()
