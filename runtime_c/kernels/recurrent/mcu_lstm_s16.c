/* One 16x8 LSTM layer with CMSIS-NN's arm_lstm_unidirectional_s16 arithmetic (TFLite Micro's integer LSTM
 * with int16 activations; mcu/reference/lstm_s16.py computes the same bit for bit). Per batch item, from
 * the given h and c (CMSIS-NN's hidden_state and cell_state; NULL: zeros), per step t and hidden unit j, for the
 * gate rows r of j (i, f, g, o):
 *
 *   pre_r = sat16(sat16(rq64(bias_r + W_ih[r] . x_t)) + rq64(W_hh[r] . h))      Q3.12 (none from a zero h)
 *   i, f, o = sigmoid(pre), g = tanh(pre)                                        Q0.15
 *   c = sat16(rq(f c, forget)); c = sat16(c + rq(i g, input))                    scale 2^-cell_shift
 *   h = sat16(rq(o tanh(c), out))                                                the output row, read back as h
 *
 * rq64 is the 16x8 requantization of kernels_s16.h (multiplier and shift of quant[r]), rq kernels_s8.h's.
 * sigmoid and tanh are arm_nn_activation_s16: the input times 3 (the cell's tanh: times 3 * 2^(12 - cs), or
 * a rounding shift right for cs > 12) read in CMSIS-NN's table of sigmoid(k / 24) with linear interpolation.
 * CMSIS-NN computes each gate for all units, then the cell; a unit's values depend on nothing else of the
 * step, so this order gives the same bits with the cell as the only state in scratch. On DSP cores each
 * step's input and hidden state are first copied in SMLAD's lane order (two rows share each load); the
 * sums are exact either way. */
#include "mcu/kernels_s16.h"

#include "lstm_s16.h"

int32_t mcu_lstm_s16_get_buffer_size(const mcu_lstm_s16_params *p)
{
    if (p == NULL || p->hidden <= 0 || p->hidden > MCU_LSTM_S16_MAX_FEATURES || p->input_size <= 0 ||
        p->input_size > MCU_LSTM_S16_MAX_FEATURES) {
        return 0;
    }
    return 2 * (2 * p->hidden + p->input_size);
}

mcu_status mcu_lstm_s16(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                        const int16_t *state, const int16_t *cell0, const int8_t *w_ih, const int8_t *w_hh,
                        const int64_t *bias, const int32_t *quant, int16_t *output)
{
    MCU_CHECK(mcu_lstm16_check(ctx, p, input, NULL, state, cell0, w_ih, w_hh, bias, quant, output,
                               mcu_lstm_s16_get_buffer_size(p)));
    const int32_t hidden = p->hidden;
    int16_t *cell = (int16_t *)ctx->buf;
    int16_t *col_x = cell + hidden;
    int16_t *col_h = col_x + p->input_size;
    /* the cell's tanh input times 3 * 2^(12 - cs): a multiplier, or a rounding shift right for cs > 12 */
    const int32_t ls = 12 - p->cell_shift;
    const int32_t c_mult = ls < 0 ? 3 : 3 << ls;
    const int32_t c_rshift = ls < 0 ? -ls : 0;
    const int32_t c_round = c_rshift > 0 ? 1 << (c_rshift - 1) : 0;
    mcu_rnn16_rq to_cell_f, to_cell_i, to_hidden;
    mcu_rnn16_rq_init(&to_cell_f, p->forget_mult, p->forget_shift);
    mcu_rnn16_rq_init(&to_cell_i, p->input_mult, p->input_shift);
    mcu_rnn16_rq_init(&to_hidden, p->out_mult, p->out_shift);
    for (int32_t b = 0; b < p->batch; ++b) {
        mcu_lstm16_first_cell(cell, cell0, b, hidden);
        const int16_t *h = state != NULL ? state + (size_t)b * (size_t)hidden : NULL;
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int16_t *x = input + step * (size_t)p->input_size;
            int16_t *y = output + step * (size_t)hidden;
            mcu_rnn16_lanes(x, p->input_size, col_x);
            if (h != NULL) {
                mcu_rnn16_lanes(h, hidden, col_h);
            }
            for (int32_t j = 0; j < hidden; ++j) {
                int32_t gi, gf, gg, go;
                mcu_lstm16_gate2(p, j, hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gi, &gf);
                mcu_lstm16_gate2(p, 2 * hidden + j, 3 * hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gg,
                                 &go);
                const int32_t i = mcu_rnn16_sigmoid(gi);
                const int32_t f = mcu_rnn16_sigmoid(gf);
                const int32_t g = mcu_rnn16_tanh(gg * 3);
                const int32_t o = mcu_rnn16_sigmoid(go);
                int32_t c = mcu_rnn16_sat(mcu_rnn16_rq_apply(&to_cell_f, f * cell[j]));
                c = mcu_rnn16_sat(c + mcu_rnn16_rq_apply(&to_cell_i, i * g));
                cell[j] = (int16_t)c;
                const int32_t tc = mcu_rnn16_tanh(mcu_asr32(c * c_mult + c_round, c_rshift));
                y[j] = (int16_t)mcu_rnn16_sat(mcu_rnn16_rq_apply(&to_hidden, o * tc));
            }
            h = y;
        }
    }
    return MCU_OK;
}
