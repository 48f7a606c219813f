"""Stage 7: emit C (or, later, a program file) from a planned graph."""
