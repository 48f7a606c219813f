"""Everything about the target: board descriptions, the toolchain and builds, ELF and map readers, the stack bound, UF2 and the boot stage, flashing, simulators."""
