/* One int8 GRU layer: PyTorch's GRU cell on the integer machinery of mcu_lstm_s8 (TFLite has no builtin
 * GRU; mcu/quant/recurrent.py computes the same bit for bit). Per batch item, from h = 0.0 (codes
 * hidden_zp), per step t, with the LSTM's per-row products px (input) and ph (recurrent), both int16:
 *
 *   r = sigmoid(sat16(px + ph)), z = sigmoid(sat16(px + ph))       rows [0, H) and [H, 2H); Q0.15
 *   n = tanh(sat16(px + round(r ph / 2^(cs + 3))))                 rows [2H, 3H): ph = Whn h + bhn at 2^-cs
 *   h = clamp(hidden_zp + rq((2^15 - z) n, out_mult, out_shift) + round(z (h - hidden_zp) / 2^15))
 *
 * (1 - z) n is Q0.30, requantized to hidden steps; z h is already in hidden steps. round() ties up. */
#include <string.h>

#include "mcu/kernels_s8.h"

#include "recurrent_s8.h"

int32_t mcu_gru_s8_get_buffer_size(const mcu_recurrent_s8_params *p)
{
    return mcu_recurrent_scratch(p, 4);
}

mcu_status mcu_gru_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                      const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                      int8_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    const int32_t hidden = p->hidden;
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, output, 3,
                                  mcu_gru_s8_get_buffer_size(p)));
    int16_t *gates = (int16_t *)ctx->buf; /* r, z pre-activations, then the input part of n */
    int16_t *cand = gates + 3 * hidden;   /* Whn h + bhn */
    int16_t *col_x = cand + hidden;
    int16_t *col_h = col_x + p->input_size;
    int8_t *h = (int8_t *)(col_h + hidden);
    const int32_t cand_shift = p->state_shift + 15 - MCU_RECURRENT_GATE_FRAC;
    for (int32_t b = 0; b < p->batch; ++b) {
        memset(h, p->hidden_zp, (size_t)hidden);
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int8_t *x = input + step * (size_t)p->input_size;
            mcu_recurrent_widen(x, p->input_size, col_x);
            mcu_recurrent_widen(h, hidden, col_h);
            for (int32_t r = 0; r < 3 * hidden; r += 2) {
                int32_t gx[2];
                int32_t gh[2];
                mcu_recurrent_rows2(p, r, 3 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gx, gh);
                for (int32_t i = 0; i < 2 && r + i < 3 * hidden; ++i) {
                    if (r + i < 2 * hidden) {
                        gates[r + i] = (int16_t)mcu_sat_s16(gx[i] + gh[i]);
                    } else {
                        gates[r + i] = (int16_t)gx[i];
                        cand[r + i - 2 * hidden] = (int16_t)gh[i];
                    }
                }
            }
            int8_t *y = output + step * (size_t)hidden;
            for (int32_t j = 0; j < hidden; ++j) {
                const int32_t rg = mcu_sigmoid_s16(table, gates[j]);
                const int32_t z = mcu_sigmoid_s16(table, gates[hidden + j]);
                const int32_t pre = mcu_sat_s16(gates[2 * hidden + j] + mcu_round_shift(rg * cand[j], cand_shift));
                const int32_t n = mcu_tanh_s16(table, pre);
                const int32_t keep = mcu_round_shift(z * (h[j] - p->hidden_zp), 15);
                const int64_t v = (int64_t)mcu_recurrent_rq((32768 - z) * n, p->out_mult, p->out_shift) + p->hidden_zp +
                                  keep;
                y[j] = (int8_t)mcu_clamp_s32(mcu_sat_s32(v), -128, 127);
            }
            memcpy(h, y, (size_t)hidden);
        }
    }
    return MCU_OK;
}
