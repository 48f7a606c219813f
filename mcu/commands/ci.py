"""``mcu ci --renode``: a GitHub Actions workflow and the Renode files that run a model matrix in CI.

The workflow installs the Arm cross compiler, Renode (the portable Linux release, with the Robot
Framework requirements of ``renode-test``) and mcu, then runs ``mcu run --sim renode`` for every
(model, board) pair. Beside it go the Renode platform, script and Robot test of each board, rendered by
mcu.device.sim.renode exactly as ``mcu run --sim renode`` renders them, for running ``renode-test`` by hand.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import jinja2

from mcu import paths
from mcu.version import __version__
from mcu.device.boards import load_board
from mcu.errors import McuError
from mcu.device.sim.renode import check_renode_board, render_renode_files

# The Renode release the workflow downloads (overridable in the workflow's env).
RENODE_VERSION = "1.15.3"
WORKFLOW = ".github/workflows/mcu-renode.yml"
ROBOT_DIR = "renode"
# The versions scripts/setup installs (tests/seams/test_seams_errors.py holds the two files to the same pins): the
# CPU build of torch, since a plain `torch` requirement pulls a multi-GB CUDA build and a newer release may
# export differently.
TORCH_PIN = "torch==2.13.0"
TORCHAO_PIN = "torchao==0.18.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class CiRequest:
    models: list[str]  # model.py paths as the workflow sees them (relative to the repository root)
    boards: list[str]
    out_dir: Path  # the repository root
    # mcu's sources as pip takes them: a folder inside the repository (e.g. a submodule) or a git URL;
    # None: the repository itself when it is mcu's own.
    mcu_source: str | None = None
    install: str | None = None  # a whole install command instead of the pinned one


def install_commands(req: CiRequest) -> list[str]:
    """The workflow's install lines: torch and torchao at the pins scripts/setup uses, then mcu from source
    (mcu is not on PyPI)."""
    if req.install:
        return [req.install]
    source = req.mcu_source
    if source is None:
        if not _is_mcu_checkout(req.out_dir):
            raise McuError(f"{req.out_dir} is not a checkout of mcu, and mcu is not a published package",
                           hint="pass --mcu-source with mcu's folder inside the repository (e.g. a git submodule) "
                                "or its git URL (git+https://...)")
        source = "."
    elif "://" not in source and not _is_mcu_checkout(req.out_dir / source):
        raise McuError(f"--mcu-source {source}: {req.out_dir / source} is not a checkout of mcu (no pyproject.toml "
                       "naming mcu)", hint="give the folder relative to the repository root (-o), or a git URL")
    elif "://" in source and not source.startswith("git+"):
        source = f"git+{source}"
    if "://" not in source and source.strip("/") not in ("", "."):
        source = "./" + source.strip("/")  # pip reads a bare name as a package on an index
    return [f'python -m pip install -q "{TORCH_PIN}" --index-url {TORCH_CPU_INDEX}',
            f'python -m pip install -q "{TORCHAO_PIN}"',
            f'python -m pip install -q "{source}"']


def _is_mcu_checkout(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text()
    except OSError:
        return False
    return '\nname = "mcu"\n' in text and (folder / "scripts" / "setup").is_file()


def write_renode_ci(req: CiRequest) -> list[Path]:
    if not req.models:
        raise McuError("mcu ci needs at least one model.py", hint="e.g. mcu ci --renode models/kws.py")
    install = install_commands(req)
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
        models=req.models, boards=req.boards, install=install, robot_dir=ROBOT_DIR,
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


def cmd_ci(args: argparse.Namespace) -> int:
    root = Path(args.output)
    models = []
    for m in map(Path, args.models):
        if m.is_absolute() and not m.resolve().is_relative_to(root.resolve()):
            raise McuError(f"model file {m} is outside the repository root {root}",
                           hint="give model.py paths inside the repository (-o is its root)")
        models.append((m.resolve().relative_to(root.resolve()) if m.is_absolute() else m).as_posix())
    files = write_renode_ci(CiRequest(models=models, boards=args.boards or ["mps2-an505"], out_dir=root,
                                      mcu_source=args.mcu_source, install=args.install))
    print("\n".join(f"wrote {f}" for f in files))
    return 0
