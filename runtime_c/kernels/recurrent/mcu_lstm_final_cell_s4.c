/* mcu_lstm_final_cell_s8 of a layer with 4-bit weights (mcu_lstm_s4's operands), bit for bit the cell mcu_lstm_s4
 * ran through. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

mcu_status mcu_lstm_final_cell_s4(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                                  const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                                  const int8_t *hidden_states, int16_t *cell_out)
{
    return mcu_lstm_final_cell_run(1, ctx, p, input, w_ih, w_hh, rows, table, hidden_states, cell_out);
}
