"""The package's version: what generated C, program files and exported libraries record as their producer."""

__version__ = "0.1.0"
