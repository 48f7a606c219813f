"""The C side of a ``delegate`` op: the backend's runtime (what generated code names, includes, compiles
and links), which the backend declares (:attr:`mcu.backends.base.Backend.runtime`) and the registry
finds by the op's backend id, and the registry source every delegated build compiles.

A generated library compiles only the runtimes of the backends its delegate ops name, and a model
without delegate ops none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcu.errors import McuError

if TYPE_CHECKING:  # pragma: no cover
    from mcu.backends.base import DelegateRuntime

REGISTRY_SOURCE = "src/mcu_delegate.c"


def runtime_for(backend: str, op_name: str) -> DelegateRuntime:
    from mcu.backends.registry import delegate_runtime, delegate_runtimes  # lazy: no backend at the emitter's load

    runtime = delegate_runtime(backend)
    if runtime is None:
        raise McuError(f"no C runtime for delegate backend '{backend}' (partition {op_name})",
                       hint=f"delegate backends with a C runtime: {', '.join(delegate_runtimes())}")
    return runtime
