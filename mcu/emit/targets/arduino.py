"""arduino: a library in the Arduino library format (1.5: library.properties, src/, examples/).

Arduino adds only ``src/`` to the include path, so the runtime headers go to ``src/mcu/``; every ``.c``
under ``src/`` is compiled as C, the example sketch as C++ (the model header is ``extern "C"``).
"""

from __future__ import annotations

from pathlib import Path

from mcu.emit.targets.common import (EXAMPLE_OWN_BYTES, ExportJob, Writer, example_stack_bytes,
                                       write_library_tree, write_vectors)

# Arduino cores on Cortex-M: Nano 33 BLE and Portenta (mbed), the Raspberry Pi Pico cores, SAMD/SAM.
ARCHITECTURES = ("mbed", "mbed_nano", "mbed_portenta", "mbed_rp2040", "rp2040", "samd", "sam")


def write(job: ExportJob) -> list[Path]:
    p = job.lib.prefix
    w = Writer(job.out_dir)
    write_library_tree(w, job, base="src", include_dir="", embed_defines=True)
    write_vectors(w, job, f"examples/{p}")
    view = {"m": job.lib.view, "architectures": ",".join(ARCHITECTURES), "stack": job.stack,
            "own": EXAMPLE_OWN_BYTES, "need": example_stack_bytes(job.stack, 0)}
    w.render("library.properties", "targets/arduino/library.properties.j2", **view)
    w.render(f"examples/{p}/{p}.ino", "targets/arduino/example.ino.j2", **view)
    return w.written
