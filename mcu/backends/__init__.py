"""Kernel backends: the table of int8 kernel variants and where each applies (variants.py)."""
