"""What ``mcu ops`` prints: every ATen overload the frontend lowers, the IR op kinds it becomes, and the C
kernels that run each kind in fp32 and in int8 models.

Nothing here is a hand-written list of ops or kernels. The rows are read from the real tables, so they
cannot drift from what a build does:

* the ATen overloads are the frontend's handler table (:func:`mcu.frontend.lower.supported_ops`' source);
* the op kinds a handler emits are the kind names its code (and the frontend helpers it calls, and the
  values its closure holds) mentions, among the kinds some backend or converter knows;
* the fp32 and int8 kernels of a kind are the C functions the portable backend's emitter for
  ``(kind, dtype)`` names (its f-strings filled from the emitter's closure; int8 convolutions and linear
  layers through the variant table), the int8 kind being what the quantized lowering's converter makes;
* the other backends are those of the registry besides the portable one and the user's custom kernels
  (:func:`mcu.backends.registry.alternatives`) whose support table has a row for the kind;
* the ops that still run as fp32 islands in int8 models are :data:`mcu.passes.quantized.fp32_islands.ISLANDS`, which a test
  checks by quantizing a small model with each op (tests/kernels/test_islands_s8.py).
"""

from __future__ import annotations

import argparse
import dis
import importlib
import inspect
import json
import re
from dataclasses import asdict, dataclass
from types import CodeType, FunctionType
from typing import Any, Callable, Iterable
from mcu.backends.portable.variants import INT8_VARIANTS
from mcu.backends.portable.core import EMITTERS
from mcu.backends.registry import backend_class
from mcu.passes.quantized.fp32_islands import ISLANDS

ISLAND = "fp32 island"
VIEW = "view (no code)"
NO_CODE = "no code (folded or passed through)"
# Op kinds that emit no kernel call of their own.
_NO_CODE = {"reshape": VIEW}


@dataclass(frozen=True)
class OpRow:
    aten: str  # the ATen overload, "aten.gelu.default"
    kinds: tuple[str, ...]  # IR op kinds the handler emits
    fp32: tuple[str, ...]  # C kernels that run them in an fp32 model
    int8: tuple[str, ...]  # C kernels that run them in an int8 model, or ("fp32 island",)
    backends: tuple[str, ...]  # other backends with a support-table row for one of the kinds
    island: str = ""  # why it runs as an fp32 island in int8 models (mcu.passes.quantized.fp32_islands), "" if it does not

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- reading code -------------------------------------------------------------------------------------


def _codes(code: CodeType) -> Iterable[CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, CodeType):
            yield from _codes(c)


def _referenced(fn: FunctionType) -> Iterable[Any]:
    """The objects a function's code names: its globals (and a global module's attributes it reads), what
    it imports inside, its closure's values."""
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell (a name bound later)
            continue
    for code in _codes(fn.__code__):
        module = None
        last: Any = None
        for ins in dis.get_instructions(code):
            if ins.opname == "IMPORT_NAME":
                module = ins.argval
            elif ins.opname == "IMPORT_FROM" and module:
                try:
                    yield getattr(importlib.import_module(module), ins.argval)
                except (ImportError, AttributeError):
                    continue
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and inspect.ismodule(last):
                yield getattr(last, ins.argval, None)
            last = None
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in fn.__globals__:
                last = fn.__globals__[ins.argval]
                yield last


def _strings(fn: FunctionType) -> set[str]:
    """The string constants of a function, but those it only compares against (``approximate == "tanh"``)."""
    out = set()
    for code in _codes(fn.__code__):
        ins = list(dis.get_instructions(code))
        for i, x in enumerate(ins):
            if x.opname == "LOAD_CONST" and isinstance(x.argval, str) and not (
                    i + 1 < len(ins) and ins[i + 1].opname == "COMPARE_OP"):
                out.add(x.argval)
    for cell in fn.__closure__ or ():
        try:
            if isinstance(cell.cell_contents, str):
                out.add(cell.cell_contents)
        except ValueError:
            continue
    return out


def _ours(obj: Any, prefix: str) -> bool:
    return isinstance(obj, FunctionType) and obj.__module__.startswith(prefix)


def names_used(fn: Callable, known: set[str], prefix: str) -> set[str]:
    """The strings of ``known`` that ``fn`` or a function of a module under ``prefix`` it reaches uses."""
    seen: set[int] = set()
    found: set[str] = set()
    todo: list[Any] = [fn]
    while todo:
        f = todo.pop()
        if not isinstance(f, FunctionType) or id(f) in seen:
            continue
        seen.add(id(f))
        found |= _strings(f) & known
        todo.extend(o for o in _referenced(f) if _ours(o, prefix))
    return found


_KERNEL = re.compile(r'f?"(mcu_[A-Za-z0-9_{}]+?)(?:\.c)?"')
_NOT_KERNELS = re.compile(r"_params$|^mcu_shape4$|^mcu_context$")  # C types an emitter names too


def emitter_kernels(emit: Callable, kind: str) -> set[str]:
    """The C functions an emitter names: its string literals and f-strings (filled from its closure), and
    the function names its closure holds; an int8 matrix op's kernels are its rows of the variant table;
    an emitter that names none calls one that does (``_pad_s8`` builds on ``_pad``)."""
    seen: set[int] = set()
    todo: list[Any] = [emit]
    while todo:
        f = todo.pop(0)
        if not isinstance(f, FunctionType) or id(f) in seen:
            continue
        seen.add(id(f))
        refs = list(_referenced(f))
        if any(getattr(r, "__name__", "") == "select_variant" for r in refs):
            return {v.function for v in INT8_VARIANTS if v.kind == kind}
        closure = {}
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
        found = {v for v in closure.values() if isinstance(v, str) and v.startswith("mcu_") and "." not in v}
        for template in _KERNEL.findall(inspect.getsource(f)):
            try:
                found.add(template.format(**closure))
            except (KeyError, IndexError):
                continue
        found = {k for k in found if not _NOT_KERNELS.search(k)}
        if found:
            return found
        todo.extend(r for r in refs if _ours(r, "mcu.backends"))
    return set()


# --- the tables ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tables:
    handlers: dict[str, Callable]  # "aten.gelu.default" -> frontend handler
    emitters: dict[tuple[str, str], Callable]  # portable backend: (kind, dtype) -> emitter
    converters: dict[str, Callable]  # quantized lowering: float kind -> converter
    backends: dict[str, set[tuple[str, str]]]  # other backend -> its (kind, dtype) rows

    @property
    def kinds(self) -> set[str]:
        """Every op kind some table knows (what a handler's strings are matched against)."""
        rows = {k for rows in self.backends.values() for k, _ in rows}
        return {k for k, _ in self.emitters} | set(self.converters) | rows | set(_NO_CODE)


def load_tables() -> Tables:
    # lazy: keeps torch out of this module's import
    from mcu.backends.registry import alternatives
    from mcu.capture.edge import op_name
    # lazy: keeps torch out of this module's import
    from mcu.frontend.lower import all_handlers
    from mcu.passes.quantized.core import CONVERTERS

    backends = {}
    for name in alternatives():
        try:
            cls = backend_class(name)
        except Exception:  # noqa: BLE001 - a backend whose dependencies are missing lists nothing
            continue
        backends[name] = {(r.kind, d) for r in cls.rules for d in r.dtypes}
    return Tables({op_name(t): h for t, h in all_handlers().items()}, dict(EMITTERS), dict(CONVERTERS), backends)


def int8_kinds(tables: Tables, kind: str) -> set[str]:
    """The int8 op kinds the quantized lowering turns a float ``kind`` into (none: it has no converter)."""
    conv = tables.converters.get(kind)
    if conv is None:
        return set()
    known = tables.kinds
    closure = set()
    for cell in conv.__closure__ or ():
        try:
            closure.add(cell.cell_contents)
        except (ValueError, TypeError):
            continue
    int8 = {k for k, d in tables.emitters if d == "int8"}
    made = {c for c in closure if isinstance(c, str) and c in known} or names_used(conv, int8, "mcu.passes")
    return made or {kind}  # a converter that names no kind keeps the op's own (Op(op.kind, ...))


def _kernels(tables: Tables, kinds: Iterable[str], dtypes: Callable[[str], bool]) -> set[str]:
    out: set[str] = set()
    for k in kinds:
        if k in _NO_CODE:
            out.add(_NO_CODE[k])
        for (kind, d), emit in tables.emitters.items():
            if kind == k and dtypes(d):
                out |= emitter_kernels(emit, k)
    return out


def _pick(kernels: set[str], drop: tuple[str, ...]) -> set[str]:
    """An emitter that picks by input dtype (argmax) names every form: keep the column's own."""
    kept = {k for k in kernels if not k.endswith(drop)}
    return kept or kernels


def kind_kernels(tables: Tables, kind: str) -> tuple[set[str], set[str]]:
    """(fp32 kernels, int8 kernels) of one op kind; no int8 kernels: it runs as an fp32 island."""
    fp32 = _pick(_kernels(tables, [kind], lambda d: d not in ("int8", "int16")), ("_s8", "_s16"))  # w8a16: its own table
    made = int8_kinds(tables, kind)
    if made:
        int8 = _kernels(tables, made, lambda d: d == "int8")
    elif any(k == kind for k, _ in tables.emitters) and not any(k == kind and d == "float32"
                                                                  for k, d in tables.emitters):
        # an integer result (argmax, compare): the lowering leaves the op as it is
        int8 = _kernels(tables, [kind], lambda d: True)
    else:
        int8 = set()
    return fp32, _pick(int8, ("_f32", "_s16"))


def op_rows(tables: Tables | None = None) -> list[OpRow]:
    tables = tables or load_tables()
    known = tables.kinds
    rows = []
    for aten, handler in sorted(tables.handlers.items()):
        kinds = sorted(names_used(handler, known, "mcu.frontend."))
        fp32: set[str] = set()
        int8: set[str] = set()
        lacking = False  # some kind of it has no int8 kernel
        for k in kinds:
            f, i = kind_kernels(tables, k)
            fp32 |= f
            int8 |= i
            lacking |= not i
        if not kinds:  # the input itself, or a constant the frontend computes
            fp32 = int8 = {NO_CODE}
        island = ISLANDS.get(aten, "")
        if island or lacking:
            int8 = {ISLAND}
        others = sorted({b for b, r in tables.backends.items() for k in kinds for d in ("float32", "int8")
                         if (k, d) in r})
        rows.append(OpRow(aten, tuple(kinds), tuple(sorted(fp32)), tuple(sorted(int8)), tuple(others), island))
    return rows


def render(rows: list[OpRow]) -> str:
    """An aligned table, one row per ATen overload (kernels without their ``mcu_`` prefix)."""
    def short(names: tuple[str, ...]) -> str:
        return ", ".join(n.removeprefix("mcu_") for n in names) or "-"

    head = ("ATen op", "IR kinds", "fp32 kernels", "int8 kernels", "other backends")
    body = [(r.aten, ", ".join(r.kinds), short(r.fp32), short(r.int8), ", ".join(r.backends) or "-") for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    checked = [r for r in rows if r.island]
    derived = [r for r in rows if r.int8 == (ISLAND,) and not r.island]
    lines.append("")
    lines.append(f"{len(rows)} ATen ops; {len(checked) + len(derived)} run as fp32 islands in int8 models.")
    lines.append(f"Checked by quantizing each (tests/kernels/test_islands_s8.py), {len(checked)}:")
    lines.extend(f"  {r.aten}: {r.island}" for r in checked)
    if derived:
        lines.append(f"No int8 form in the converter table (not in that census), {len(derived)}:")
        lines.extend(f"  {r.aten}" for r in derived)
    return "\n".join(lines)


def cmd_ops(args: argparse.Namespace) -> int:
    rows = op_rows()
    if getattr(args, "json", False):
        print(json.dumps([r.to_json() for r in rows], indent=1))
    else:
        print(render(rows))
    return 0
