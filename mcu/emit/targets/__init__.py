"""Export targets: one module per firmware ecosystem, registered in :data:`TARGETS`.

A target turns an :class:`~mcu.emit.targets.common.ExportJob` (the generated library, the output folder,
the bundled vectors) into files; its templates live in ``codegen/targets/<target>/``. Add a target by
writing one module with a ``write(job)`` function and one row below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcu.emit.targets import arduino
from mcu.emit.targets import cmsis_pack
from mcu.emit.targets import library
from mcu.emit.targets import pico_sdk
from mcu.emit.targets import zephyr
from mcu.emit.targets.common import ExportJob


@dataclass(frozen=True)
class Target:
    name: str
    summary: str
    write: Callable[[ExportJob], list[Path]]
    example: bool  # writes an example app, so it needs the bundled vectors


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("cmake", "the C library with a CMakeLists.txt and a Makefile fragment (default)", library.write, False),
    Target("make", "the same library folder as cmake (it carries both build files)", library.write, False),
    Target("pico-sdk", "a folder for add_subdirectory in a Pico SDK project, with an example app",
           pico_sdk.write, True),
    Target("arduino", "an Arduino library (library.properties, src/, examples/)", arduino.write, True),
    Target("zephyr", "a Zephyr module (module.yml, Kconfig, zephyr_library) and a sample app", zephyr.write, True),
    Target("cmsis-pack", "a CMSIS software pack (.pdsc and .pack) with the model as a component",
           cmsis_pack.write, False),
)}

DEFAULT_TARGET = "cmake"

__all__ = ["DEFAULT_TARGET", "TARGETS", "ExportJob", "Target"]
