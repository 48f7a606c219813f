"""placeholder until bench/kernel_code.py finishes"""

CODE_BYTES: dict[str, dict[str, int]] = {'mps2-an505': {'mcu_conv2d_compact_s8': 5112,
                'mcu_conv2d_lut_s8': 3380,
                'mcu_conv2d_s4': 5248,
                'mcu_conv2d_s8': 6652,
                'mcu_linear_compact_s8': 1872,
                'mcu_linear_lut_s8': 1488,
                'mcu_linear_s4': 3728}}
