"""``mcu ci --renode``: a GitHub Actions workflow and the Renode files that run a model matrix in CI.

The workflow installs the Arm cross compiler, Renode (the portable Linux release, with the Robot
Framework requirements of ``renode-test``) and mcu, then runs ``mcu run --sim renode`` for every
(model, board) pair. Beside it go the Renode platform, script and Robot test of each board, rendered by
mcu.sim.renode exactly as ``mcu run --sim renode`` renders them, for running ``renode-test`` by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from mcu import __version__, paths
from mcu.boards import load_board
from mcu.errors import McuError
from mcu.sim.renode import check_renode_board, render_renode_files

# The Renode release the workflow downloads (overridable in the workflow's env).
RENODE_VERSION = "1.15.3"
WORKFLOW = ".github/workflows/mcu-renode.yml"
ROBOT_DIR = "renode"


@dataclass(frozen=True)
class CiRequest:
    models: list[str]  # model.py paths as the workflow sees them (relative to the repository root)
    boards: list[str]
    out_dir: Path  # the repository root
    install: str = "python -m pip install mcu"


def write_renode_ci(req: CiRequest) -> list[Path]:
    if not req.models:
        raise McuError("mcu ci needs at least one model.py", hint="e.g. mcu ci --renode models/kws.py")
    for name in req.boards:
        check_renode_board(load_board(name))
    for model in req.models:
        if not (req.out_dir / model).is_file():
            raise McuError(f"model file {model} does not exist under {req.out_dir}",
                           hint="give model.py paths relative to the repository root (-o)")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.renode_dir())), trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    text = env.get_template("github-workflow.yml.j2").render(
        name="mcu models in Renode", version=__version__, renode_version=RENODE_VERSION,
        models=req.models, boards=req.boards, install=req.install, robot_dir=ROBOT_DIR,
        gha=lambda expr: "${{ " + expr + " }}")  # a GitHub Actions expression, whose braces Jinja2 would take
    workflow = req.out_dir / WORKFLOW
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(text)
    written = [workflow]
    for name in req.boards:
        # The script refers to the platform file beside it, so the folder can be committed as is.
        files = render_renode_files(load_board(name), req.out_dir / ROBOT_DIR, repl_path=f"$ORIGIN/{name}.repl")
        written += [files.repl, files.resc, files.robot]
    return written
