/* One int8 GRU layer: PyTorch's GRU cell on the integer machinery of mcu_lstm_s8 (TFLite has no builtin
 * GRU; mcu/quant/recurrent.py computes the same bit for bit). Per batch item, from h = 0.0 (codes
 * hidden_zp), per step t, with the LSTM's per-row products px (input) and ph (recurrent), both int16:
 *
 *   r = sigmoid(sat16(px + ph)), z = sigmoid(sat16(px + ph))       rows [0, H) and [H, 2H); Q0.15
 *   n = tanh(sat16(px + round(r ph / 2^(cs + 3))))                 rows [2H, 3H): ph = Whn h + bhn at 2^-cs
 *   h = clamp(hidden_zp + rq((2^15 - z) n, out_mult, out_shift) + round(z (h - hidden_zp) / 2^15))
 *
 * (1 - z) n is Q0.30, requantized to hidden steps; z h is already in hidden steps. round() ties up. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

int32_t mcu_gru_s8_get_buffer_size(const mcu_recurrent_s8_params *p)
{
    return mcu_recurrent_scratch(p, 4);
}

mcu_status mcu_gru_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                      const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                      int8_t *output)
{
    return mcu_gru_run(0, ctx, p, input, w_ih, w_hh, rows, table, NULL, output);
}
