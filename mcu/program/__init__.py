"""Program files: the flatbuffer format that the C interpreter in runtime_c/interp runs.

``writer`` turns compiled methods into a program file (and an optional external
weights file); ``format`` holds the fixed header, kernel ids and field ids;
``methods`` reads multi-method model files; ``device`` builds the interpreter
firmware and runs programs on it. The host runtime is :mod:`mcu.program.host`.
"""

from mcu.program.writer import BundledVector, DelegatePayload, MethodSource, ProgramImage, write_program

__all__ = ["BundledVector", "DelegatePayload", "MethodSource", "ProgramImage", "write_program"]
