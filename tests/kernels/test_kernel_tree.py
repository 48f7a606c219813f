"""runtime_c/kernels' layout: one folder per op family (its public kernels, one per file, and the internal
headers only it uses) and common/ (the internal headers several families share). The include graph of
those files has no circle, common/ reaches into no family, and a family reaches into no other family."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mcu.paths import all_kernel_sources, kernel_source, kernels_dir

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_graph(root: Path) -> dict[str, list[str]]:
    """Tree path (family/name) -> the tree paths it includes (resolved beside the including file)."""
    files = {p.relative_to(root).as_posix(): p for p in root.glob("*/*") if p.suffix in (".c", ".h")}
    graph: dict[str, list[str]] = {}
    for rel, path in files.items():
        here = posixpath.dirname(rel)
        targets = [posixpath.normpath(posixpath.join(here, name)) for name in INCLUDE.findall(path.read_text())]
        graph[rel] = [t for t in targets if t in files]
    return graph


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every include circle, each as the path that closes it."""
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def crossings(graph: dict[str, list[str]]) -> list[str]:
    """Includes that leave the including file's family for another family (common/ may be reached from
    anywhere; common/ itself reaches only common/)."""
    bad = []
    for rel, targets in sorted(graph.items()):
        family = rel.split("/")[0]
        for t in targets:
            other = t.split("/")[0]
            if other != family and other != "common":
                bad.append(f"{rel} -> {t}")
    return bad


def test_no_include_circle() -> None:
    assert circles(include_graph(kernels_dir())) == []


def test_families_include_only_themselves_and_common() -> None:
    assert crossings(include_graph(kernels_dir())) == []


def test_every_family_header_is_used_by_that_family_only() -> None:
    graph = include_graph(kernels_dir())
    users: dict[str, set[str]] = {}
    for rel, targets in graph.items():
        for t in targets:
            users.setdefault(t, set()).add(rel.split("/")[0])
    for header, families in sorted(users.items()):
        if not header.startswith("common/"):
            assert families == {header.split("/")[0]}, (header, families)
    unused = sorted(h for h in graph if h.endswith(".h") and h not in users)
    assert unused == [], unused


def test_kernel_sources_are_found_by_name() -> None:
    sources = all_kernel_sources()
    assert len({p.name for p in sources}) == len(sources), "two families hold a kernel of the same name"
    assert not list(kernels_dir().glob("*.c")), "a kernel outside any family folder"
    for path in sources:
        assert kernel_source(path.name) == path


def test_the_checks_see_a_circle_and_a_crossing(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "pooling").mkdir()
    (tmp_path / "common" / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "common" / "b.h").write_text('#include "../pooling/c.h"\n')
    (tmp_path / "pooling" / "c.h").write_text('#include "../common/a.h"\n')
    graph = include_graph(tmp_path)
    assert circles(graph) and crossings(graph) == ["common/b.h -> pooling/c.h"]
