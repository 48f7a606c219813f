"""Stage 3: an Edge-dialect ``ExportedProgram`` turned into the mcu IR, one module per family of ATen ops (``lower`` is the entry point)."""
