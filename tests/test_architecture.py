"""The layered order of mcu's packages (docs/ARCHITECTURE.md), kept by the code.

The import graph of ``mcu/`` is read with ``ast`` (nothing is imported, so the check is fast and cannot
be fooled by import-time side effects) and four rules are checked on it:

- no import circle between modules (imports under ``if TYPE_CHECKING:`` never run and are left out);
- no import of another module's private name (``from x import _y`` or ``x._y`` on an imported module);
- no package importing one above it in ``LAYERS``, and the oracle (``mcu.reference``) importing nothing
  from the emitters, the backends or the passes;
- an import inside a function only with a comment saying why, ``# lazy: <why>`` on its line or the line
  above it: such imports are kept for optional or heavy dependencies that must stay out of start-up.

Each violation prints the edge: ``file:line importer -> imported``. The checker is run on small
packages written to ``tmp_path`` to show that it finds each kind of violation it is meant to find.

``python tests/test_architecture.py`` prints the figures of the tree (modules, packages, circles, private
imports, function-level imports, the largest file and function).
"""

from __future__ import annotations

import ast
import io
import sys
import textwrap
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Low to high: a module may import modules of its own layer or of a layer listed before it. A layer is a
# package of mcu (its subpackages included) or one of the modules at mcu's top level. Keep in step with
# docs/ARCHITECTURE.md (test_architecture_doc_lists_every_layer checks it).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "paths", "progress", "version", "_native"),
    ("ir", "layouts", "emit.cvalues"),
    ("reference",),
    ("capture",),
    ("quantize",),
    ("frontend",),
    ("passes",),
    ("plan", "device.boards", "program.format"),
    ("backends",),
    ("emit",),
    ("device",),
    ("program",),
    ("pipeline",),
    ("api",),
    ("program.methods", "program.fuzz"),
    ("devtools",),
    ("generate",),
    ("commands",),
    ("__init__",),
)

# The oracle computes every parameter itself: whatever the layer order says, it may not import these.
ORACLE = "reference"
ORACLE_FORBIDDEN = ("emit", "backends", "passes")

# Edges that break a rule today and are being removed elsewhere (importer, imported): the oracle's borrowings
# from the emitters and the passes. A listed edge that no longer exists fails the test too, so that the list
# only ever shrinks.
KNOWN: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    """One import statement's edge from one module to another module of the package."""

    importer: str  # dotted module name, e.g. "mcu.api"
    imported: str  # dotted module name of the module that is loaded
    names: tuple[str, ...]  # names taken from it ("from x import a, b"); empty for "import x"
    path: Path
    line: int
    in_function: bool
    type_only: bool  # under "if TYPE_CHECKING:"
    explained: bool  # a comment on its line or the line above it

    def where(self, root: Path) -> str:
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line} {self.importer} -> {self.imported}"


@dataclass
class Graph:
    """Modules of a package and the imports between them."""

    package: str
    root: Path  # the folder the package's folder is in
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)
    private_uses: list[tuple[Import, str]] = field(default_factory=list)  # (edge, private name)
    external_in_function: list[tuple[str, Path, int, bool]] = field(default_factory=list)
    extensions: set[str] = field(default_factory=set)  # compiled modules of the package


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _comment_lines(source: str) -> set[int]:
    """Lines with a comment giving a function-level import's reason: ``# lazy: <why>``."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.lstrip("# ").startswith("lazy"):
            lines.add(token.start[0])
    return lines


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def build_graph(package_dir: Path, extensions: tuple[str, ...] = ()) -> Graph:
    """Read every module under ``package_dir`` and resolve its imports of the package's own modules.
    ``extensions``: dotted names of compiled modules (no Python source; nothing to read in them)."""
    root = package_dir.parent
    package = package_dir.name
    graph = Graph(package=package, root=root)
    for path in sorted(package_dir.rglob("*.py")):
        graph.modules[module_name(root, path)] = path
    for name in extensions:
        graph.extensions.add(name)

    def resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = importer.split(".")
        base = base if is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    for name, path in graph.modules.items():
        source = path.read_text()
        comments = _comment_lines(source)
        explained: set[int] = set()  # line numbers of import statements that carry their reason

        def explain(node: ast.stmt, previous: ast.AST | None) -> bool:
            """A comment on the import or on the line above it; a group of imports shares one comment."""
            end = node.end_lineno or node.lineno
            ok = any(line in comments for line in range(node.lineno - 1, end + 1)) or (
                isinstance(previous, (ast.Import, ast.ImportFrom))
                and (previous.end_lineno or previous.lineno) == node.lineno - 1
                and previous.lineno in explained
            )
            if ok:
                explained.add(node.lineno)
            return ok
        tree = ast.parse(source, filename=str(path))
        is_package = path.name == "__init__.py"
        aliases: dict[str, Import] = {}  # local name bound to one of the package's modules

        def visit(node: ast.AST, in_function: bool, type_only: bool) -> None:
            previous: ast.AST | None = None
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(child, True, type_only)
                elif isinstance(child, ast.If) and _is_type_checking(child.test):
                    for branch, flag in ((child.body, True), (child.orelse, type_only)):
                        before: ast.AST | None = None
                        for stmt in branch:
                            visit_stmt(stmt, before, in_function, flag)
                            visit(stmt, in_function, flag)
                            before = stmt
                else:
                    visit_stmt(child, previous, in_function, type_only)
                    visit(child, in_function, type_only)
                previous = child

        def add(imported: str, names: tuple[str, ...], node: ast.stmt, in_function: bool, type_only: bool) -> Import:
            edge = Import(name, imported, names, path, node.lineno, in_function, type_only, node.lineno in explained)
            graph.imports.append(edge)
            return edge

        def visit_stmt(node: ast.AST, previous: ast.AST | None, in_function: bool, type_only: bool) -> None:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                explain(node, previous)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    if target.split(".")[0] != package:
                        if in_function:
                            graph.external_in_function.append((name, path, node.lineno, node.lineno in explained))
                        continue
                    edge = add(target, (), node, in_function, type_only)
                    if alias.asname:
                        aliases[alias.asname] = edge
            elif isinstance(node, ast.ImportFrom):
                target = resolve(name, is_package, node)
                if target.split(".")[0] != package:
                    if in_function and target != "__future__":
                        graph.external_in_function.append((name, path, node.lineno, node.lineno in explained))
                    return
                plain: list[str] = []
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in graph.modules or sub in graph.extensions:  # "from pkg import module"
                        edge = add(sub, (), node, in_function, type_only)
                        aliases[alias.asname or alias.name] = edge
                    else:
                        plain.append(alias.name)
                if plain:
                    edge = add(target, tuple(plain), node, in_function, type_only)
                    for item in plain:
                        if _private(item) and target != name:
                            graph.private_uses.append((edge, item))

        visit(tree, False, False)
        # "module._name" on a module bound by an import above
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
                and aliases[node.value.id].imported != name
            ):
                graph.private_uses.append((aliases[node.value.id], node.attr))
    return graph


def layer_of(module: str, layers: tuple[tuple[str, ...], ...]) -> str:
    """The layer a module belongs to: the longest entry of ``layers`` naming it or a package around it
    (entries are dotted paths below the root package); ``__init__`` for the root package itself."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    names = {name for group in layers for name in group}
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in names:
            return ".".join(parts[:end])
    return parts[0]


def layer_rank(layers: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    return {name: rank for rank, group in enumerate(layers) for name in group}


def circles(graph: Graph) -> list[list[Import]]:
    """Strongly connected components of the runtime import graph, each given by the edges inside it."""
    edges: dict[str, set[str]] = defaultdict(set)
    for edge in graph.imports:
        if not edge.type_only and edge.imported in graph.modules and edge.imported != edge.importer:
            edges[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = [0]

    def connect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.add(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(component)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph.modules) + 100))
    try:
        for node in sorted(graph.modules):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    return [
        [e for e in graph.imports if not e.type_only and e.importer in comp and e.imported in comp]
        for comp in found
    ]


def layering_breaks(
    graph: Graph,
    layers: tuple[tuple[str, ...], ...],
    oracle: str = ORACLE,
    oracle_forbidden: tuple[str, ...] = ORACLE_FORBIDDEN,
) -> list[tuple[Import, str]]:
    """Imports of a layer above the importer's, and imports the oracle may not make; with the reason."""
    rank = layer_rank(layers)
    found = []
    for edge in graph.imports:
        if edge.type_only:  # annotations only: nothing is loaded
            continue
        if edge.imported not in graph.modules and edge.imported not in graph.extensions:
            continue
        low, high = layer_of(edge.importer, layers), layer_of(edge.imported, layers)
        if low not in rank or high not in rank:
            found.append((edge, f"layer of {low if low not in rank else high!r} is not in LAYERS"))
        elif rank[high] > rank[low]:
            found.append((edge, f"{low} imports {high}, which is above it"))
        elif low == oracle and high.split(".")[0] in oracle_forbidden:
            found.append((edge, f"the oracle imports {high}"))
    return found


def unexplained_function_imports(graph: Graph, known: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """Function-level imports with no comment giving their reason (but the known edges)."""
    found = [
        edge.where(graph.root)
        for edge in graph.imports
        if edge.in_function and not edge.explained and (edge.importer, edge.imported) not in known
    ]
    found += [
        f"{path.relative_to(graph.root) if path.is_relative_to(graph.root) else path}:{line} {module} (external)"
        for module, path, line, explained in graph.external_in_function
        if not explained
    ]
    return found


def violations(
    graph: Graph,
    layers: tuple[tuple[str, ...], ...] = LAYERS,
    known: frozenset[tuple[str, str]] = KNOWN,
) -> dict[str, list[str]]:
    """Every rule's offending edges, as printable lines; the known edges left out."""
    root = graph.root

    def allowed(edge: Import) -> bool:
        return (edge.importer, edge.imported) in known

    return {
        "circle": [
            "circle: " + "; ".join(edge.where(root) for edge in comp)
            for comp in circles(graph)
            if not all(allowed(edge) for edge in comp)
        ],
        "private": [
            f"private name {item!r}: {edge.where(root)}" for edge, item in graph.private_uses if not allowed(edge)
        ],
        "layering": [
            f"{reason}: {edge.where(root)}" for edge, reason in layering_breaks(graph, layers) if not allowed(edge)
        ],
        "function-level": [
            f"function-level import without a reason: {where}" for where in unexplained_function_imports(graph, known)
        ],
    }


# ---- the tree -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mcu_graph() -> Graph:
    return build_graph(ROOT / "mcu", extensions=("mcu._native",))


@pytest.mark.parametrize("rule", ["circle", "private", "layering", "function-level"])
def test_mcu_keeps_the_rule(mcu_graph: Graph, rule: str) -> None:
    found = violations(mcu_graph)[rule]
    assert not found, f"{len(found)} {rule} violation(s) in mcu/:\n" + "\n".join(found)


def test_known_exceptions_still_exist(mcu_graph: Graph) -> None:
    edges = {(edge.importer, edge.imported) for edge in mcu_graph.imports}
    stale = sorted(KNOWN - edges)
    assert not stale, f"remove these from KNOWN, they are gone: {stale}"


def test_every_package_has_a_layer(mcu_graph: Graph) -> None:
    rank = layer_rank(LAYERS)
    missing = sorted({layer_of(name, LAYERS) for name in mcu_graph.modules} - set(rank))
    assert not missing, f"add these to LAYERS and docs/ARCHITECTURE.md: {missing}"


def test_architecture_doc_lists_every_layer() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]

    def shown(name: str) -> str:
        if name.startswith("_"):  # a compiled extension
            return f"`mcu.{name}`"
        path = ROOT / "mcu" / name.replace(".", "/")
        return f"`mcu/{name.replace('.', '/')}/`" if path.is_dir() else f"`mcu/{name.replace('.', '/')}.py`"

    names = [shown(name) for group in LAYERS for name in group if name != "__init__"]
    missing = [name for name in names if name not in table]
    assert not missing, f"docs/ARCHITECTURE.md's layer table does not describe {missing}"
    positions = [table.index(name) for name in names]
    assert positions == sorted(positions), "docs/ARCHITECTURE.md lists the layers in another order than LAYERS"


# ---- the checker finds what it is meant to find -----------------------------------------------------

def write_package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path / "pkg"


SYNTHETIC_LAYERS = (("low",), ("mid",), ("high",), ("__init__",))
CLEAN = {
    "__init__.py": "",
    "low/__init__.py": "",
    "low/base.py": "def helper():\n    return 1\n",
    "mid/__init__.py": "",
    "mid/common.py": "from pkg.low.base import helper\n\n\ndef shared():\n    return helper()\n",
    "mid/user.py": "from pkg.mid import common\nfrom .common import shared\n",
    "high/__init__.py": "",
    "high/top.py": (
        "from pkg.mid.user import shared\n\n\ndef run():\n"
        "    # lazy: json is only needed here\n    import json\n    return json, shared\n"
    ),
}


def test_checker_passes_a_clean_package(tmp_path: Path) -> None:
    graph = build_graph(write_package(tmp_path, CLEAN))
    assert graph.modules.keys() >= {"pkg.low.base", "pkg.mid.common", "pkg.mid.user", "pkg.high.top"}
    assert ("pkg.mid.user", "pkg.mid.common") in {(e.importer, e.imported) for e in graph.imports}
    assert violations(graph, SYNTHETIC_LAYERS, frozenset()) == {
        "circle": [],
        "private": [],
        "layering": [],
        "function-level": [],
    }


def test_checker_reports_a_circle(tmp_path: Path) -> None:
    files = dict(CLEAN, **{
        "low/base.py": "def helper():\n    # lazy: late\n    from pkg.low import other\n",
        "low/other.py": "from pkg.low.base import helper\n",
    })
    found = violations(build_graph(write_package(tmp_path, files)), SYNTHETIC_LAYERS, frozenset())
    assert len(found["circle"]) == 1
    assert "pkg/low/base.py:3 pkg.low.base -> pkg.low.other" in found["circle"][0]
    assert "pkg/low/other.py:1 pkg.low.other -> pkg.low.base" in found["circle"][0]
    assert not found["private"] and not found["layering"] and not found["function-level"]


def test_checker_reports_a_private_import(tmp_path: Path) -> None:
    files = dict(CLEAN, **{
        "low/base.py": "def _helper():\n    return 1\n\n\ndef helper():\n    return _helper()\n",
        "mid/common.py": "from pkg.low.base import _helper, helper\nfrom pkg.low import base\n\nX = base._helper\n",
    })
    found = violations(build_graph(write_package(tmp_path, files)), SYNTHETIC_LAYERS, frozenset())
    assert found["private"] == [
        "private name '_helper': pkg/mid/common.py:1 pkg.mid.common -> pkg.low.base",
        "private name '_helper': pkg/mid/common.py:2 pkg.mid.common -> pkg.low.base",
    ]
    assert not found["circle"] and not found["layering"]


def test_checker_reports_a_layering_break_and_the_oracle(tmp_path: Path) -> None:
    files = dict(CLEAN, **{"low/base.py": "from pkg.high.top import run\n"})
    found = violations(build_graph(write_package(tmp_path, files)), SYNTHETIC_LAYERS, frozenset())
    assert found["layering"] == ["low imports high, which is above it: pkg/low/base.py:1 pkg.low.base -> pkg.high.top"]
    assert found["circle"]  # high -> mid -> low -> high

    oracle = dict(CLEAN, **{"high/top.py": "from pkg.mid.common import shared\n"})
    graph = build_graph(write_package(tmp_path / "oracle", oracle))
    breaks = layering_breaks(graph, SYNTHETIC_LAYERS, oracle="high", oracle_forbidden=("mid",))
    assert [(edge.where(graph.root), why) for edge, why in breaks] == [
        ("pkg/high/top.py:1 pkg.high.top -> pkg.mid.common", "the oracle imports mid")
    ]
    # a known edge is left out, and only that one
    known = frozenset({("pkg.low.base", "pkg.high.top")})
    graph = build_graph(write_package(tmp_path, files))
    assert violations(graph, SYNTHETIC_LAYERS, known)["layering"] == []


def test_checker_reports_an_unexplained_function_import(tmp_path: Path) -> None:
    files = dict(CLEAN, **{
        "high/top.py": "def run():\n    import json\n    from pkg.mid.user import shared\n    return json, shared\n",
    })
    found = violations(build_graph(write_package(tmp_path, files)), SYNTHETIC_LAYERS, frozenset())
    assert found["function-level"] == [
        "function-level import without a reason: pkg/high/top.py:3 pkg.high.top -> pkg.mid.user",
        "function-level import without a reason: pkg/high/top.py:2 pkg.high.top (external)",
    ]


def test_type_checking_imports_are_no_circle(tmp_path: Path) -> None:
    files = dict(CLEAN, **{
        "low/base.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.low.other import X\n",
        "low/other.py": "from pkg.low.base import TYPE_CHECKING\nX = 1\n",
    })
    found = violations(build_graph(write_package(tmp_path, files)), SYNTHETIC_LAYERS, frozenset())
    assert found["circle"] == []


# ---- figures --------------------------------------------------------------------------------------

def figures(package_dir: Path) -> dict[str, object]:
    graph = build_graph(package_dir, extensions=(f"{package_dir.name}._native",))
    paths = sorted(package_dir.rglob("*.py"))
    top = [p for p in paths if p.parent == package_dir]
    packages = [p.parent for p in paths if p.name == "__init__.py" and p.parent != package_dir]
    function_level = [e for e in graph.imports if e.in_function] + [
        (m, p, line) for m, p, line, _ in graph.external_in_function
    ]

    def outside_commands(item) -> bool:
        module = item.importer if isinstance(item, Import) else item[0]
        command_line = (f"{graph.package}.commands", f"{graph.package}.cli", f"{graph.package}.devtools.cli")
        return not (module.startswith(command_line[0]) or module.startswith(command_line[1]) or module == command_line[2])

    largest_file = max(paths, key=lambda p: len(p.read_text().splitlines()))
    largest_function = (0, "")
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > largest_function[0]:
                    largest_function = (size, f"{path.relative_to(package_dir.parent)}:{node.name}")
    return {
        "modules at the top level": len(top),
        "packages": len(packages),
        "circles": len(circles(graph)),
        "private imports": len({(e.path, e.line, n) for e, n in graph.private_uses}),
        "function-level imports": len(function_level),
        "function-level imports outside the commands": len([i for i in function_level if outside_commands(i)]),
        "largest file": f"{largest_file.relative_to(package_dir.parent)} "
        f"({len(largest_file.read_text().splitlines())} lines)",
        "largest function": f"{largest_function[1]} ({largest_function[0]} lines)",
    }


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "mcu"
    for key, value in figures(target).items():
        print(f"{key}: {value}")
    if "-v" in sys.argv:
        for rule, lines in violations(build_graph(target, extensions=("mcu._native",))).items():
            print(f"== {rule}: {len(lines)}")
            print("\n".join(lines))
