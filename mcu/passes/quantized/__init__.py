"""The int8 conversion pass: the quantize/dequantize graph from pt2e becomes int8 ops with integer parameters (``core``), one module per op family."""
