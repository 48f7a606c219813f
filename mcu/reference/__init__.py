"""The parity oracle: the integer arithmetic of the C kernels in numpy, every kernel's bit-exact reference, and the interpreter that runs a lowered graph with them."""
