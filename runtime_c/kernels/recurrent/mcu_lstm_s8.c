/* One int8 LSTM layer with TFLite Micro's integer LSTM arithmetic (mcu/quant/recurrent.py computes the
 * same bit for bit). Per batch item, from h = 0.0 (codes hidden_zp) and c = 0, per step t and gate row r
 * (rows[r] = bias_x, mult_x, shift_x, bias_h, mult_h, shift_h):
 *
 *   pre_r = sat16(sat16(rq(bias_x + W_ih[r] . x_t, mult_x, shift_x))
 *               + sat16(rq(bias_h + W_hh[r] . h, mult_h, shift_h)))          Q3.12
 *   i, f, o = sigmoid(pre), g = tanh(pre)                                    Q0.15
 *   c = sat16(round(f c / 2^15) + round(i g / 2^(30 - cs)))                  scale 2^-cs (cs = state_shift)
 *   h = clamp(hidden_zp + rq(o tanh(c in Q3.12), out_mult, out_shift))       int8, also the output row
 *
 * c in Q3.12 is round(c / 2^(cs - 12)) for cs >= 12, else sat16(c 2^(12 - cs)); round() ties up. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

int32_t mcu_lstm_s8_get_buffer_size(const mcu_recurrent_s8_params *p)
{
    return mcu_recurrent_scratch(p, 5);
}

mcu_status mcu_lstm_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                       const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                       int8_t *output)
{
    return mcu_lstm_run(0, ctx, p, input, w_ih, w_hh, rows, table, output);
}
