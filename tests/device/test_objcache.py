"""The shared object cache: builds reuse each other's objects for sources outside their own folder, keyed
by the preprocessed text, so definitions a source does not use do not split the cache; in front of it, the
direct mode takes an object without running the compiler when the source, flags and headers are unchanged."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mcu.device import objcache, toolchain
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


def _compiler_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every run of the cross compiler on a source from now on, as (``-E`` or ``-c``, file name)."""
    seen: list[tuple[str, str]] = []
    real = toolchain._run

    def spy(cmd, what, hint=None):
        for mode in ("-E", "-c"):
            if mode in cmd:
                seen.append((mode, next(Path(a).name for a in cmd[cmd.index(mode) + 1:] if a.endswith(".c"))))
        return real(cmd, what, hint)

    monkeypatch.setattr(toolchain, "_run", spy)
    return seen


def _settle() -> None:
    """Let the files just written age past the point where the direct mode trusts their hashes."""
    time.sleep(objcache.SETTLED_NS / 1e9 + 0.1)


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
    _settle()
    board = load_board("mps2-an386")
    runs = _compiler_runs(monkeypatch)

    def build(name: str, defines: dict) -> list[tuple[str, str]]:
        out = tmp_path / name
        src = _model_dir(out, 1)
        runs.clear()
        build_firmware(board, [src / "main.c", shared], [src], out, defines=defines)
        return [mode for mode, source in runs if source == "shared.c"]

    assert build("a", {"SHARED_SCALE": 2, "MODEL_ONLY": 1}) == ["-E", "-c"]
    assert build("a2", {"SHARED_SCALE": 2, "MODEL_ONLY": 1}) == [], "the same flags and headers ran the compiler"
    assert build("b", {"SHARED_SCALE": 2, "MODEL_ONLY": 2}) == [], \
        "a definition shared.c never reads made the compiler run on it again"
    assert build("c", {"SHARED_SCALE": 3, "MODEL_ONLY": 2}) == ["-E", "-c"], \
        "a definition shared.c reads must give another object"
    assert build("c2", {"SHARED_SCALE": 3}) == [], "the value shared.c read was not recorded"
    assert build("d", {"SHARED_SCALE": 2}) == [], "the first value's record was lost"


def _shared_c_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lib_sources: list[Path]):
    """A builder of firmware ``name`` with ``defines`` around ``lib_sources``: it returns the compiler's modes
    (-E, -c) run on shared.c for that build."""
    board = load_board("mps2-an386")
    runs = _compiler_runs(monkeypatch)

    def build(name: str, defines: dict) -> list[str]:
        out = tmp_path / name
        src = _model_dir(out, 1)
        runs.clear()
        build_firmware(board, [src / "main.c", *lib_sources], [src], out, defines=defines)
        return [mode for mode, source in runs if source == "shared.c"]

    return build


def test_a_definition_of_a_plain_identifier_recompiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A word the preprocessor passed through (no macro consulted it) becomes one when defined."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shared = lib / "shared.c"
    shared.write_text(f"/* {tmp_path} */\nint other(int);\nint shared(int x) {{ return other(x); }}\n")
    (lib / "funcs.c").write_text("#undef other\n#undef another\n"
                                 "int other(int x) { return x + 1; }\nint another(int x) { return x + 2; }\n")
    _settle()
    build = _shared_c_builds(tmp_path, monkeypatch, [shared, lib / "funcs.c"])

    assert build("a", {}) == ["-E", "-c"]
    assert build("b", {"other": "another"}) == ["-E", "-c"], "a definition of a called function's name was not seen"
    assert build("c", {"another": "other"}) == [], "a name shared.c never reads made the compiler run on it again"


def test_a_definition_whose_name_a_source_pastes_together_recompiles(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A name built by ``PREFIX_##name`` appears in no text the cache reads (the interpreter's kernel table keeps a
    kernel by MCU_PROGRAM_HAS_<name>): a build that defines one more such name compiled the source again, not
    took the object of a build without it (its table then lacked the kernel)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    shared = lib / "shared.c"
    shared.write_text(f"/* {tmp_path} */\n#define IS1_1 1\n#define KEPT(n) KEPT_(HAS_##n)\n"
                      "#define KEPT_(v) KEPT__(v)\n#define KEPT__(v) (IS1_##v + 0)\n"
                      "enum { IS1_HAS_a, IS1_HAS_b };\n"
                      "int shared(int x) { return x + KEPT(a) + 2 * KEPT(b); }\n")
    _settle()
    build = _shared_c_builds(tmp_path, monkeypatch, [shared])

    assert build("a", {"HAS_a": 1}) == ["-E", "-c"]
    assert build("b", {"HAS_a": 1, "HAS_b": 1}) == ["-E", "-c"], "the pasted HAS_b was not seen"
    assert build("c", {"HAS_a": 1}) == [], "the same definitions compiled again"


def test_a_warm_rebuild_runs_no_compiler_on_cached_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCU_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "scale.h").write_text("#define SCALE 3\n")
    shared = lib / "shared.c"
    shared.write_text('#include "scale.h"\n#include <stdint.h>\nint shared(int x) { return SCALE * (int32_t)x; }\n')
    _settle()
    board = load_board("mps2-an505")
    runs = _compiler_runs(monkeypatch)
    for name in ("a", "b"):
        runs.clear()
        out = tmp_path / name
        src = _model_dir(out, 1)
        build_firmware(board, [src / "main.c", shared], [src, lib], out)
    assert runs == [("-c", "main.c")], "only the model's own source should be compiled in a warm rebuild"
    # The stamp lists the same headers as a compiled build's: a changed header still rebuilds the firmware.
    stamps = [json.loads((tmp_path / name / "firmware.stamp.json").read_text())["deps"] for name in ("a", "b")]
    stamps = [{dep: digest for dep, digest in deps.items() if not Path(dep).is_relative_to(tmp_path / name)}
              for deps, name in zip(stamps, ("a", "b"))]
    assert stamps[0] == stamps[1]
    assert str(lib / "scale.h") in stamps[1]


def _fresh_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """lib/shared.c, with a cache of the test's own."""
    monkeypatch.setenv("MCU_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "lib"
    lib.mkdir()
    shared = lib / "shared.c"
    shared.write_text("int shared(int x) { return 3 * x; }\n")
    return shared


def test_builds_with_and_without_a_stack_bound_share_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-fstack-usage only adds the .su file beside the object: both kinds of build take the one object."""
    shared = _fresh_shared(tmp_path, monkeypatch)
    board = load_board("mps2-an505")
    runs = _compiler_runs(monkeypatch)
    for name, stack_usage in (("a", False), ("b", True)):
        out = tmp_path / name
        src = _model_dir(out, 1)
        runs.clear()
        fw = build_firmware(board, [src / "main.c", shared], [src], out, stack_usage=stack_usage)
    assert ("-c", "shared.c") not in runs, "the stack-bounding build compiled the shared source again"
    assert fw.stack is not None and "shared" in json.loads((tmp_path / "b" / "firmware.frames.json").read_text())


def test_concurrent_builds_compile_a_source_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds at once (test workers sharing the cache): a shared source the first is compiling is waited
    for, not compiled again; a second build into the same folder waits for the first and takes its image."""
    shared = _fresh_shared(tmp_path, monkeypatch)
    board = load_board("mps2-an386")
    compiles: list[str] = []
    real = toolchain._run

    def slow(cmd, what, hint=None):
        if "-c" in cmd:
            compiles.append(Path(cmd[cmd.index("-c") + 1]).name)
            time.sleep(0.5)  # long enough for the other build to reach the same compile
        return real(cmd, what, hint)

    monkeypatch.setattr(toolchain, "_run", slow)
    outs = [tmp_path / "a", tmp_path / "b", tmp_path / "b"]
    for out in outs[:2]:
        _model_dir(out, 1)
    with ThreadPoolExecutor(len(outs)) as pool:
        images = list(pool.map(lambda out: build_firmware(board, [out / "src" / "main.c", shared], [out / "src"], out),
                               outs))
    assert compiles.count("shared.c") == 1
    assert compiles.count("main.c") == 2, "the two builds into one folder compiled its model twice"
    assert images[1] == images[2]


def _nested(tmp_path: Path) -> tuple[Path, Path, Path]:
    """shared.c in lib/src reads SCALE from lib/b/inner.h through lib/b/outer.h; lib/a (searched first) is empty."""
    lib = tmp_path / "lib"
    for folder in ("src", "a", "b"):
        (lib / folder).mkdir(parents=True)
    (lib / "b" / "outer.h").write_text('#include "inner.h"\n#define OUTER (SCALE + 1)\n')
    (lib / "b" / "inner.h").write_text(f"/* {tmp_path} */\n#define SCALE 3\n")
    shared = lib / "src" / "shared.c"
    shared.write_text('#include <outer.h>\nint shared(int x) { return OUTER * x; }\n')
    _settle()
    return shared, lib / "a", lib / "b"


def _shared_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: Path, includes: list[Path]):
    board = load_board("mps2-an386")
    runs = _compiler_runs(monkeypatch)
    count = iter(range(100))

    def build() -> list[str]:
        out = tmp_path / f"out{next(count)}"
        src = _model_dir(out, 1)
        runs.clear()
        build_firmware(board, [src / "main.c", shared], [src, *includes], out)
        return [mode for mode, source in runs if source == "shared.c"]

    return build


def test_a_header_reached_through_another_changes_and_the_source_recompiles(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    shared, first, second = _nested(tmp_path)
    build = _shared_builds(tmp_path, monkeypatch, shared, [first, second])
    assert build() == ["-E", "-c"]
    assert build() == []
    (second / "inner.h").write_text(f"/* {tmp_path} */\n#define SCALE 4\n")
    assert build() == ["-E", "-c"], "a changed header included by another header must recompile the source"
    (second / "inner.h").write_text(f"/* {tmp_path} */\n#define SCALE 3\n")
    assert build() == [], "back to the first header: its record holds again"


def test_a_new_header_that_hides_the_one_read_recompiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded headers are all unchanged, but the name now leads to another file: found in a folder
    searched earlier (``-I`` order), and next to the including header (quoted names look there first)."""
    shared, first, second = _nested(tmp_path)
    build = _shared_builds(tmp_path, monkeypatch, shared, [first, second])
    assert build() == ["-E", "-c"]
    assert build() == []
    (first / "outer.h").write_text('#include "inner.h"\n#define OUTER (SCALE + 2)\n')
    assert build() == ["-E", "-c"], "an outer.h in an earlier include folder was not seen"
    (first / "inner.h").write_text(f"/* {tmp_path} */\n#define SCALE 7\n")
    assert build() == ["-E", "-c"], "an inner.h next to the outer.h that includes it was not seen"


def test_a_damaged_manifest_falls_back_to_preprocessing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCU_CACHE_DIR", str(tmp_path / "cache"))
    shared, first, second = _nested(tmp_path)
    build = _shared_builds(tmp_path, monkeypatch, shared, [first, second])
    assert build() == ["-E", "-c"]
    manifests = list((tmp_path / "cache" / "objects" / "direct").rglob("*.json"))
    assert manifests
    for manifest in manifests:
        manifest.write_text(manifest.read_text()[:40])  # as a writer killed half way would leave it
    assert build() == ["-E"]
    assert build() == []


@pytest.mark.parametrize("text", [
    b'#include MODEL_HEADER\n',
    b'#include_next <stdint.h>\n',
    b'const char *when = __DATE__;\n',
    b'#if __has_include(HEADER)\n#endif\n',
])
def test_what_the_direct_mode_cannot_follow_is_left_to_the_preprocessor(text: bytes) -> None:
    assert objcache.included_names(b'#include "a.h"\n' + text) is None


def test_the_names_a_file_may_include() -> None:
    text = b'#include "a.h"\n  #  include <b/c.h>\n#if __has_include("d.h")\n#endif\n// #include "e.h"\n'
    assert objcache.included_names(text) == [(False, "b/c.h"), (True, "a.h"), (True, "d.h")]
