"""Stage 2 (int8): the pt2e flow with :class:`~mcu.quantize.quantizer.MCUQuantizer`, the graph rewrites before annotation, and torchao's int4 weights."""
