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
#include <string.h>

#include "mcu/kernels_s8.h"

#include "recurrent_s8.h"

int32_t mcu_lstm_s8_get_buffer_size(const mcu_recurrent_s8_params *p)
{
    return mcu_recurrent_scratch(p, 5);
}

mcu_status mcu_lstm_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                       const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                       int8_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    const int32_t hidden = p->hidden;
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, output, 4,
                                  mcu_lstm_s8_get_buffer_size(p)));
    int16_t *gates = (int16_t *)ctx->buf;
    int16_t *cell = gates + 4 * hidden;
    int16_t *col_x = cell + hidden;
    int16_t *col_h = col_x + p->input_size;
    int8_t *h = (int8_t *)(col_h + hidden);
    const int32_t cs = p->state_shift;
    for (int32_t b = 0; b < p->batch; ++b) {
        memset(h, p->hidden_zp, (size_t)hidden);
        memset(cell, 0, (size_t)hidden * sizeof(int16_t));
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int8_t *x = input + step * (size_t)p->input_size;
            mcu_recurrent_widen(x, p->input_size, col_x);
            mcu_recurrent_widen(h, hidden, col_h);
            mcu_recurrent_sum_rows(p, 4 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gates);
            int8_t *y = output + step * (size_t)hidden;
            for (int32_t j = 0; j < hidden; ++j) {
                const int32_t i = mcu_sigmoid_s16(table, gates[j]);
                const int32_t f = mcu_sigmoid_s16(table, gates[hidden + j]);
                const int32_t g = mcu_tanh_s16(table, gates[2 * hidden + j]);
                const int32_t o = mcu_sigmoid_s16(table, gates[3 * hidden + j]);
                const int32_t c = mcu_sat_s16(mcu_round_shift(f * cell[j], 15) + mcu_round_shift(i * g, 30 - cs));
                cell[j] = (int16_t)c;
                const int32_t c12 = cs >= MCU_RECURRENT_GATE_FRAC
                                        ? mcu_round_shift(c, cs - MCU_RECURRENT_GATE_FRAC)
                                        : mcu_sat_s16(c * (1 << (MCU_RECURRENT_GATE_FRAC - cs)));
                const int64_t v = (int64_t)mcu_recurrent_rq(o * mcu_tanh_s16(table, c12), p->out_mult, p->out_shift) +
                                  p->hidden_zp;
                y[j] = (int8_t)mcu_clamp_s32(mcu_sat_s32(v), -128, 127);
            }
            memcpy(h, y, (size_t)hidden);
        }
    }
    return MCU_OK;
}
