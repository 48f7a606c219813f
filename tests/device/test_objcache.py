"""The shared object cache: builds reuse each other's objects for sources outside their own folder, keyed
by the preprocessed text, so definitions a source does not use do not split the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mcu.device import toolchain
from mcu.device.boards import load_board
from mcu.device.toolchain import build_firmware

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")


def _compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The test's own sources the cross compiler is run on from now on (by file name)."""
    seen: list[str] = []
    real = toolchain._run

    def spy(cmd, what, hint=None):
        source = Path(cmd[cmd.index("-c") + 1]).name if "-c" in cmd else None
        if source in ("main.c", "shared.c"):  # the board's port sources may come from the cache or not
            seen.append(source)
        return real(cmd, what, hint)

    monkeypatch.setattr(toolchain, "_run", spy)
    return seen


def _model_dir(out: Path, value: int) -> Path:
    """A generated folder inside the build's own folder, as `mcu` stages a model's C."""
    src = out / "src"
    src.mkdir(parents=True)
    (src / "model.h").write_text(f"#define MODEL_VALUE {value}\n")
    (src / "main.c").write_text('#include "model.h"\nint shared(int);\nint main(void) { return shared(MODEL_VALUE); }\n')
    return src


def test_a_shared_source_compiles_once_and_a_changed_header_recompiles_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    # The folder's name in the text makes this source new to any cache the test session shares.
    (lib / "scale.h").write_text(f"/* {tmp_path} */\n#define SCALE 3\n")
    shared = lib / "shared.c"
    shared.write_text('#include "scale.h"\nint shared(int x) { return SCALE * x; }\n')
    board = load_board("mps2-an505")
    compiled = _compiled(monkeypatch)

    def build(name: str, value: int):
        out = tmp_path / name
        src = _model_dir(out, value)
        return build_firmware(board, [src / "main.c", shared], [src, lib], out)

    first = build("a", 1)
    assert sorted(compiled) == ["main.c", "shared.c"]
    compiled.clear()
    second = build("b", 2)
    assert compiled == ["main.c"], "the second model's build compiled the shared source again"
    assert first.elf != second.elf
    compiled.clear()
    (lib / "scale.h").write_text(f"/* {tmp_path} */\n#define SCALE 5\n")
    build("c", 3)
    assert sorted(compiled) == ["main.c", "shared.c"], "a changed header must recompile what includes it"


def test_a_source_in_the_build_folder_is_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated sources differ per model: keeping their objects would only fill the cache."""
    monkeypatch.setenv("MCU_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    src = _model_dir(out, 7)
    (src / "shared.c").write_text("int shared(int x) { return x; }\n")
    build_firmware(load_board("mps2-an386"), [src / "main.c", src / "shared.c"], [src], out)
    kept = [Path(json.loads(m.read_text())["source"]) for m in (tmp_path / "cache" / "objects").rglob("manifest.json")]
    assert kept, "the port's sources should have been kept"
    assert not [src for src in kept if src.is_relative_to(out)]


def test_a_definition_only_the_model_uses_does_not_split_the_cache(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    shared = lib / "shared.c"
    shared.write_text(f"/* {tmp_path} */\nint shared(int x) {{ return SHARED_SCALE * x; }}\n")
    board = load_board("mps2-an386")
    compiled = _compiled(monkeypatch)

    def build(name: str, defines: dict) -> None:
        out = tmp_path / name
        src = _model_dir(out, 1)
        build_firmware(board, [src / "main.c", shared], [src], out, defines=defines)

    build("a", {"SHARED_SCALE": 2, "MODEL_ONLY": 1})
    build("b", {"SHARED_SCALE": 2, "MODEL_ONLY": 2})
    assert compiled.count("shared.c") == 1, "a definition shared.c never reads made it compile again"
    build("c", {"SHARED_SCALE": 3, "MODEL_ONLY": 2})
    assert compiled.count("shared.c") == 2, "a definition shared.c reads must give another object"
