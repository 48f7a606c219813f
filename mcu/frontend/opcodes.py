"""Function codes the C kernels take as parameters (runtime_c/include/mcu/kernels_f32.h): the frontend
names IR ops with the keys, the emitters pass the numbers. Append only: generated code embeds them."""

UNARY_FN = {"gelu": 0, "gelu_tanh": 1, "silu": 2, "hardsigmoid": 3, "leaky_relu": 4, "elu": 5, "softplus": 6,
            "exp": 7, "log": 8, "sqrt": 9, "rsqrt": 10, "abs": 11, "neg": 12, "reciprocal": 13, "erf": 14,
            "pow": 15, "log_sigmoid": 16, "affine": 17, "rsub": 18, "mish": 19}  # mcu_unary_fn
REDUCE_OP = {"sum": 0, "mean": 1, "amax": 2, "amin": 3}  # mcu_reduce_op
COMPARE_OP = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}  # mcu_cmp (kernels_generic.h)
COMPARE_TYPE = {"float32": 0, "int32": 1, "int8": 2, "uint8": 3}  # mcu_cmp_type
