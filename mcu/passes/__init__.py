"""Lowering passes. Each takes a :class:`~mcu.ir.Graph` and rewrites it in place."""
