"""The parity oracle: the integer arithmetic of the C kernels in numpy (``arith``), every kernel's
bit-exact reference in its family's module (``conv``, ``pool``, ``elementwise``, ``norm``, ``movement``,
``select``, ``recurrent``, ``resample``...; what they share in ``common``), each int8 op's parameters
derived from the quantized graph (``derive``), and the interpreter that runs a lowered graph with them
(``interp``)."""
