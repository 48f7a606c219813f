#include "mcu/kernels_f32.h"

#include "broadcast_f32.h"

mcu_status mcu_div_f32(const mcu_binary_f32_params *p, const float *a, const float *b, float *output)
{
    return mcu_binary_f32(MCU_BINARY_DIV, p, a, b, output);
}
