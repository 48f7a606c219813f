"""zephyr: a Zephyr module (zephyr/module.yml, CMakeLists.txt with zephyr_library, Kconfig) and a sample.

    out/zephyr/module.yml, out/CMakeLists.txt, out/Kconfig    the module (enable with CONFIG_<KCONFIG>=y)
    out/samples/<prefix>/                                     an application that runs the bundled vectors
"""

from __future__ import annotations

from pathlib import Path

from mcu.emit.targets.common import (EXAMPLE_OWN_BYTES, ExportJob, Writer, example_stack_bytes,
                                       write_library_tree, write_vectors)

# CONFIG_MAIN_STACK_SIZE when the model's stack is unknown (the value the sample used before it was derived)
FALLBACK_MAIN_STACK = 4096


def kconfig_symbol(prefix: str) -> str:
    """The module's Kconfig option, namespaced so that it cannot collide with Zephyr's own."""
    return f"MCU_MODEL_{prefix.upper()}"


def main_stack_size(job: ExportJob) -> int:
    """The sample's CONFIG_MAIN_STACK_SIZE: the model's analysed stack plus the sample's own use."""
    return example_stack_bytes(job.stack, FALLBACK_MAIN_STACK)


def write(job: ExportJob) -> list[Path]:
    p = job.lib.prefix
    w = Writer(job.out_dir)
    tree = write_library_tree(w, job)
    sample = f"samples/{p}"
    vector_sources = write_vectors(w, job, f"{sample}/src")
    view = {"m": job.lib.view, "kconfig": kconfig_symbol(p), "sources": tree.sources,
            "vector_sources": vector_sources, "defines": job.lib.defines, "stack": job.stack,
            "own": EXAMPLE_OWN_BYTES, "main_stack": main_stack_size(job), "needs_libm": tree.needs_libm}
    w.render("zephyr/module.yml", "targets/zephyr/module.yml.j2", **view)
    w.render("CMakeLists.txt", "targets/zephyr/CMakeLists.txt.j2", **view)
    w.render("Kconfig", "targets/zephyr/Kconfig.j2", **view)
    w.render(f"{sample}/CMakeLists.txt", "targets/zephyr/sample_CMakeLists.txt.j2", **view)
    w.render(f"{sample}/prj.conf", "targets/zephyr/prj.conf.j2", **view)
    w.render(f"{sample}/sample.yaml", "targets/zephyr/sample.yaml.j2", **view)
    w.render(f"{sample}/src/main.c", "targets/zephyr/main.c.j2", **view)
    return w.written
