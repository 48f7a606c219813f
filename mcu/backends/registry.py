"""Backend ids -> backend classes, by lazy import path, and the preference order of a build.

A backend joins by writing one package with a :class:`~mcu.backends.base.Backend` subclass (its
support table, its options, its C) and adding one line to :data:`BACKENDS`. Nothing is imported
until a build asks for the backend, so the emitter (which looks backends up here to emit an op's
call, its delegate runtime, its kernels' definitions) imports none of them at load time, and a
backend whose dependencies are missing costs nothing to builds that do not use it.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

from mcu.backends.base import Backend, Context, DelegateRuntime
from mcu.errors import McuError

BACKENDS: dict[str, str] = {
    "cmsis-nn": "mcu.backends.cmsis_nn.core:CmsisNNBackend",
    "custom": "mcu.backends.custom.core:CustomBackend",
    "optimized": "mcu.backends.optimized.core:OptimizedBackend",
    "portable": "mcu.backends.portable.core:PortableBackend",
    "xnnpack": "mcu.backends.xnnpack.core:XnnpackBackend",
}

FALLBACK = "portable"  # takes every op some C kernel of ours runs; last of ours in a preference order
# The user's own kernels (custom ops, mcu/capture/custom_ops.py): after the fallback, since no other backend takes a
# custom op and it takes nothing else; so a model without custom ops sees no trace of it.
CUSTOM = "custom"
# Kernel libraries built from the user's own sources: first in the default order of a build that gives
# them their options (CMSIS-NN: its source tree).
EXTERNAL = ("cmsis-nn",)
OURS = ["optimized", FALLBACK]  # the default order's tail


def known() -> list[str]:
    return sorted(BACKENDS)


def alternatives() -> list[str]:
    """The backends besides the fallback and the user's custom kernels: those a user may put before
    the fallback, each taking only what its support table lists."""
    return [name for name in known() if name not in (FALLBACK, CUSTOM)]


def _unknown(name: str) -> McuError:
    return McuError(f"unknown backend '{name}'", hint=f"known backends: {', '.join(known())}")


@lru_cache(maxsize=None)
def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise _unknown(name)
    module, _, attr = BACKENDS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Backend)) or cls.id != name:
        raise McuError(f"backend '{name}' ({BACKENDS[name]}) is not a Backend with id '{name}'")
    return cls


def backend(name: str) -> Backend:
    """An instance of the backend ``name`` (backends hold no state: every instance is alike)."""
    return backend_class(name)()


Choice = "str | Backend"  # a backend id, or (from Python) a Backend instance, e.g. one that refuses more


def parse(names: str | list | tuple | None) -> list | None:
    """A preference order from the command line (``cmsis-nn,optimized,portable``) or the API (str, or a
    list of ids and :class:`Backend` instances)."""
    if names is None:
        return None
    items = names.split(",") if isinstance(names, str) else list(names)
    items = [n if isinstance(n, Backend) else n.strip() for n in items if isinstance(n, Backend) or n.strip()]
    if not items:
        raise McuError("empty backend list", hint=f"name one or more of: {', '.join(known())}")
    return items


def _id(choice: str | Backend) -> str:
    return choice.id if isinstance(choice, Backend) else choice


def check(names: list | None) -> None:
    """Fail early (before the model is captured and quantized) on an id no backend has."""
    ids = [_id(n) for n in names or []]
    for n in names or []:
        if not isinstance(n, Backend) and n not in BACKENDS:
            raise _unknown(n)
    if ids and len(set(ids)) != len(ids):
        raise McuError(f"backend listed twice in {','.join(ids)}", hint="list each backend once, in preference order")


def default_order(ctx: Context) -> list[str]:
    """CMSIS-NN first when the build has a CMSIS-NN tree (options for it), then our optimized and portable
    kernels."""
    return [name for name in EXTERNAL if ctx.options.get(name) is not None] + OURS


def delegate_runtime(name: str) -> DelegateRuntime | None:
    """The C runtime of the delegate backend ``name`` (None: the backend has none, or there is no such backend)."""
    return backend_class(name).runtime if name in BACKENDS else None


def delegate_runtimes() -> list[str]:
    """The backends with a C runtime (imports every backend: for messages)."""
    return [name for name in known() if backend_class(name).runtime is not None]


def resolve(names: list | None, ctx: Context) -> list[Backend]:
    """The backends of a preference order (None: :func:`default_order`); the portable backend is
    appended when missing so that every op we have a kernel for still finds one."""
    order = default_order(ctx) if names is None else list(names)
    check(order)
    if FALLBACK not in [_id(n) for n in order]:
        order.append(FALLBACK)
    if CUSTOM not in [_id(n) for n in order]:
        order.append(CUSTOM)
    return [n if isinstance(n, Backend) else backend(n) for n in order]
