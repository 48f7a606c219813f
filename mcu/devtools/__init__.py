"""Developer tools: the per-op event tracer's host side, ``mcu profile``, the compile record and the stack
analysis. Each tool is one module; none is needed to compile or run a model."""
