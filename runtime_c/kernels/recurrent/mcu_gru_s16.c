/* One 16x8 GRU layer: PyTorch's GRU cell on the conventions of mcu_lstm_s16 (CMSIS-NN's
 * arm_lstm_unidirectional_s16; CMSIS-NN has no GRU). mcu/reference/gru_s16.py computes the same bit for bit.
 * Per batch item, from the given state (or h = 0), per step t and hidden unit j, rows r, z, n of j:
 *
 *   r = sigmoid(sat16(sat16(rq64(b_r + W_ir x)) + rq64(W_hr h)))      Q3.12 in, Q0.15 out; z alike
 *   hn = sat16(rq64(b_hn + W_hn h))                                   the n rows' recurrent scale 2^-cs
 *   n = tanh(sat16(sat16(rq64(b_in + W_in x)) + rq(r hn, cand)))      r hn to Q3.12
 *   h' = sat16(rq(z h, keep) + rq((2^15 - z) n, out))                 the output row, read back as h
 *
 * rq64 is the 16x8 requantization of kernels_s16.h (multiplier and shift of quant[row]), rq kernels_s8.h's;
 * sigmoid, tanh, the dot products and their dual-MAC path are the LSTM's (recurrent_s16.h). Two units run
 * at a time so that each pair of weight rows shares the loads of the step's vectors (an odd last unit pairs
 * with itself). */
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"

#include "recurrent_s16.h"

int32_t mcu_gru_s16_get_buffer_size(const mcu_gru_s16_params *p)
{
    if (p == NULL || p->hidden <= 0 || p->hidden > MCU_LSTM_S16_MAX_FEATURES || p->input_size <= 0 ||
        p->input_size > MCU_LSTM_S16_MAX_FEATURES) {
        return 0;
    }
    return 2 * (p->hidden + p->input_size);
}

static mcu_status check(const mcu_context *ctx, const mcu_gru_s16_params *p, const int16_t *input,
                        const int16_t *state, const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias,
                        const int32_t *quant, const int16_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    /* the biases: the 3 rows of each unit, then the n rows' recurrent ones (b_hn) */
    const mcu_rnn16_operands o = {p->batch, p->steps, p->input_size, p->hidden, 3, 4, mcu_gru_s16_get_buffer_size(p),
                                  input, NULL, state, NULL, w_ih, w_hh, bias, quant, output};
    return mcu_rnn16_check(ctx, &o,
                           mcu_quant_valid(p->cand_mult, p->cand_shift) &&
                               mcu_quant_valid(p->keep_mult, p->keep_shift) &&
                               mcu_quant_valid(p->out_mult, p->out_shift));
}

static inline int32_t sat16_64(int64_t v)
{
    return v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : (int32_t)v;
}

/* Rows r0 and r1 of one gate for units j and j1: the input products, requantized and saturated (gx), and the
 * recurrent ones from `acc_h` (their biases), requantized (gh); no recurrent dot product for h == NULL. */
static inline void gate2(const mcu_gru_s16_params *p, int32_t r0, int32_t r1, const int16_t *x, const int16_t *col_x,
                         const int16_t *h, const int16_t *col_h, const int8_t *w_ih, const int8_t *w_hh,
                         const int64_t *bias, const int32_t *quant, int64_t acc_h0, int64_t acc_h1, int32_t gx[2],
                         int32_t gh[2])
{
    const int32_t *q0 = quant + 4 * r0;
    const int32_t *q1 = quant + 4 * r1;
    int64_t a0 = bias[r0];
    int64_t a1 = bias[r1];
    mcu_rnn16_dot2(w_ih + (size_t)r0 * (size_t)p->input_size, w_ih + (size_t)r1 * (size_t)p->input_size, x, col_x,
                   p->input_size, &a0, &a1);
    if (h != NULL) {
        mcu_rnn16_dot2(w_hh + (size_t)r0 * (size_t)p->hidden, w_hh + (size_t)r1 * (size_t)p->hidden, h, col_h,
                       p->hidden, &acc_h0, &acc_h1);
    }
    gx[0] = mcu_rnn16_sat(mcu_requantize_s16_acc(a0, q0[0], q0[1]));
    gx[1] = mcu_rnn16_sat(mcu_requantize_s16_acc(a1, q1[0], q1[1]));
    gh[0] = mcu_requantize_s16_acc(acc_h0, q0[2], q0[3]);
    gh[1] = mcu_requantize_s16_acc(acc_h1, q1[2], q1[3]);
}

mcu_status mcu_gru_s16(const mcu_context *ctx, const mcu_gru_s16_params *p, const int16_t *input,
                       const int16_t *state, const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias,
                       const int32_t *quant, int16_t *output)
{
    MCU_CHECK(check(ctx, p, input, state, w_ih, w_hh, bias, quant, output));
    const int32_t hidden = p->hidden;
    const int64_t *bias_hn = bias + 3 * hidden;
    int16_t *col_x = (int16_t *)ctx->buf;
    int16_t *col_h = col_x + p->input_size;
    mcu_rnn16_rq to_cand, keep, to_hidden;
    mcu_rnn16_rq_init(&to_cand, p->cand_mult, p->cand_shift);
    mcu_rnn16_rq_init(&keep, p->keep_mult, p->keep_shift);
    mcu_rnn16_rq_init(&to_hidden, p->out_mult, p->out_shift);
    for (int32_t b = 0; b < p->batch; ++b) {
        const int16_t *h = state != NULL ? state + (size_t)b * (size_t)hidden : NULL;
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int16_t *x = input + step * (size_t)p->input_size;
            int16_t *y = output + step * (size_t)hidden;
            mcu_rnn16_lanes(x, p->input_size, col_x);
            if (h != NULL) {
                mcu_rnn16_lanes(h, hidden, col_h);
            }
            for (int32_t j = 0; j < hidden; j += 2) {
                const int32_t j1 = j + 1 < hidden ? j + 1 : j;
                int32_t rx[2], rh[2], zx[2], zh[2], nx[2], nh[2];
                gate2(p, j, j1, x, col_x, h, col_h, w_ih, w_hh, bias, quant, 0, 0, rx, rh);
                gate2(p, hidden + j, hidden + j1, x, col_x, h, col_h, w_ih, w_hh, bias, quant, 0, 0, zx, zh);
                gate2(p, 2 * hidden + j, 2 * hidden + j1, x, col_x, h, col_h, w_ih, w_hh, bias, quant, bias_hn[j],
                      bias_hn[j1], nx, nh);
                for (int32_t u = 0; u < 2 && j + u < hidden; ++u) {
                    const int32_t r = mcu_rnn16_sigmoid(sat16_64((int64_t)rx[u] + rh[u]));
                    const int32_t z = mcu_rnn16_sigmoid(sat16_64((int64_t)zx[u] + zh[u]));
                    const int32_t cand = mcu_rnn16_rq_apply(&to_cand, r * mcu_rnn16_sat(nh[u]));
                    const int32_t n = mcu_rnn16_tanh(3 * sat16_64((int64_t)nx[u] + cand));
                    const int32_t prev = h != NULL ? h[j + u] : 0;
                    y[j + u] = (int16_t)sat16_64((int64_t)mcu_rnn16_rq_apply(&keep, z * prev) +
                                                 mcu_rnn16_rq_apply(&to_hidden, (32768 - z) * n));
                }
            }
            h = y;
        }
    }
    return MCU_OK;
}
