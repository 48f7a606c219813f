/* The final cell state c_n of an int8 LSTM layer (nn.LSTM's c_n read by the model) with mcu_lstm_s8's arithmetic
 * (TFLite Micro's integer LSTM; TFLite keeps the cell as a variable tensor, CMSIS-NN's arm_lstm_unidirectional_s8
 * in its context), from the layer's hidden states as mcu_lstm_s8 wrote them: each step's i, f and g rows read the
 * step's input and the hidden state before it (hidden_zp at the first step, else the previous output row), the
 * codes mcu_lstm_s8 read, so the cell runs through the same values bit for bit; the output gate's rows and the
 * hidden state are not computed again. The cell is written as int16 at 2^-state_shift, its own scale. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

mcu_status mcu_lstm_final_cell_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                                  const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                                  const int8_t *hidden_states, int16_t *cell_out)
{
    return mcu_lstm_final_cell_run(0, ctx, p, input, w_ih, w_hh, rows, table, hidden_states, cell_out);
}
