"""The C side of each delegate backend, as data: what generated code names, includes, compiles and links.

The emitter looks a ``delegate`` op's backend id up here; it never imports the Python backends
(mcu/backends), so backends and emitter stay independent. A generated library compiles only the
runtimes of the backends its delegate ops name, and a model without delegate ops none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcu.errors import McuError


@dataclass(frozen=True)
class DelegateRuntime:
    symbol: str  # the const mcu_delegate_backend in the C runtime
    header: str  # declares it (include path relative to runtime_c/include)
    sources: tuple[str, ...]  # relative to runtime_c
    libraries: tuple[str, ...] = ()  # linker flags of the library behind it
    hosted: bool = True  # needs an OS (malloc, threads): Linux boards only


REGISTRY_SOURCE = "src/mcu_delegate.c"

RUNTIMES: dict[str, DelegateRuntime] = {
    # Debian's libxnnpack-dev (2022-02-16) with libpthreadpool (libXNNPACK.so pulls in libcpuinfo.so.0 itself).
    "xnnpack": DelegateRuntime("mcu_xnnpack_backend", "mcu/delegate_xnnpack.h",
                               ("backends/xnnpack/mcu_xnnpack.c",), ("-lXNNPACK", "-lpthreadpool")),
}


def runtime_for(backend: str, op_name: str) -> DelegateRuntime:
    try:
        return RUNTIMES[backend]
    except KeyError:
        raise McuError(f"no C runtime for delegate backend '{backend}' (partition {op_name})",
                       hint=f"delegate backends with a C runtime: {', '.join(sorted(RUNTIMES))}") from None
