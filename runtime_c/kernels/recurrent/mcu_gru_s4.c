/* mcu_gru_s8 with 4-bit weights: w_ih and w_hh packed two a byte, continuous across rows (CMSIS-NN's s4 layout,
 * as mcu/layouts.py's pack_s4), codes symmetric per gate row; the rows, table and arithmetic are mcu_gru_s8's,
 * so the same codes give the same outputs bit for bit. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

mcu_status mcu_gru_s4(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                      const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                      int8_t *output)
{
    return mcu_gru_run(1, ctx, p, input, w_ih, w_hh, rows, table, NULL, output);
}
