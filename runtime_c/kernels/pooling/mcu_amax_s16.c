#include "mcu/kernels_s16.h"

#include "extreme_s16.h"

mcu_status mcu_amax_s16(const mcu_mean_s16_params *p, const int16_t *input, int16_t *output)
{
    return mcu_extreme_s16(1, p, input, output);
}
