"""Integer quantization arithmetic (``arith``) and the bit-exact int8 kernel reference (``reference``)."""
