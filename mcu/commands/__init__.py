"""The ``mcu`` command line (``cli``) and one module per command."""
