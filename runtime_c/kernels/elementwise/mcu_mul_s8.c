#include "mcu/kernels_s8.h"

#include "binary_s8.h"

mcu_status mcu_mul_s8(const mcu_binary_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output)
{
    return mcu_binary_s8(MCU_BINARY_S8_MUL, p, a, b, output);
}
