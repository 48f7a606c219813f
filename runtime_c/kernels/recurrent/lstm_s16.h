/* The pieces of the 16x8 LSTM that mcu_lstm_s16 and mcu_lstm_final_cell_s16 share (mcu_lstm_s16.c states the
 * arithmetic): the checks of the parameters, constants and buffers, a batch item's first cell and two gate rows'
 * pre-activations. Internal: static inline only. */
#ifndef MCU_KERNELS_INTERNAL_LSTM_S16_H
#define MCU_KERNELS_INTERNAL_LSTM_S16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "recurrent_s16.h"

/* The checks of both kernels (mcu_rnn16_check). `seq` the hidden states [batch][steps][hidden] the final-cell
 * kernel reads (NULL for mcu_lstm_s16, which writes them to `out`); `out` what the kernel writes ([batch][steps]
 * [hidden], or the final cell [batch][hidden] when `seq` is given). */
static inline mcu_status mcu_lstm16_check(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                                          const int16_t *seq, const int16_t *state, const int16_t *cell,
                                          const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias,
                                          const int32_t *quant, const int16_t *out, int32_t scratch)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    const mcu_rnn16_operands o = {p->batch, p->steps, p->input_size, p->hidden, 4, 4, scratch, input, seq, state,
                                  cell, w_ih, w_hh, bias, quant, out};
    return mcu_rnn16_check(ctx, &o,
                           p->cell_shift >= 0 && p->cell_shift <= 15 &&
                               mcu_quant_valid(p->forget_mult, p->forget_shift) &&
                               mcu_quant_valid(p->input_mult, p->input_shift) &&
                               mcu_quant_valid(p->out_mult, p->out_shift));
}

/* The batch item's first cell: its row of the given cell, or zeros. */
static inline void mcu_lstm16_first_cell(int16_t *cell, const int16_t *cell0, int32_t b, int32_t hidden)
{
    if (cell0 != NULL) {
        memcpy(cell, cell0 + (size_t)b * (size_t)hidden, (size_t)hidden * sizeof(int16_t));
    } else {
        memset(cell, 0, (size_t)hidden * sizeof(int16_t));
    }
}

/* sat16(rq64(bias + w_ih[r] . x)) then, with a previous state, sat16(that + rq64(w_hh[r] . h)), for rows r0, r1 */
static inline void mcu_lstm16_gate2(const mcu_lstm_s16_params *p, int32_t r0, int32_t r1, const int16_t *x,
                                    const int16_t *col_x, const int16_t *h, const int16_t *col_h, const int8_t *w_ih,
                                    const int8_t *w_hh, const int64_t *bias, const int32_t *quant, int32_t *g0,
                                    int32_t *g1)
{
    const int32_t *q0 = quant + 4 * r0;
    const int32_t *q1 = quant + 4 * r1;
    int64_t a0 = bias[r0];
    int64_t a1 = bias[r1];
    mcu_rnn16_dot2(w_ih + (size_t)r0 * (size_t)p->input_size, w_ih + (size_t)r1 * (size_t)p->input_size, x, col_x,
                   p->input_size, &a0, &a1);
    int32_t v0 = mcu_rnn16_sat(mcu_requantize_s16_acc(a0, q0[0], q0[1]));
    int32_t v1 = mcu_rnn16_sat(mcu_requantize_s16_acc(a1, q1[0], q1[1]));
    if (h != NULL) {
        int64_t c0 = 0;
        int64_t c1 = 0;
        mcu_rnn16_dot2(w_hh + (size_t)r0 * (size_t)p->hidden, w_hh + (size_t)r1 * (size_t)p->hidden, h, col_h,
                       p->hidden, &c0, &c1);
        v0 = mcu_rnn16_sat((int32_t)((int64_t)v0 + mcu_requantize_s16_acc(c0, q0[2], q0[3])));
        v1 = mcu_rnn16_sat((int32_t)((int64_t)v1 + mcu_requantize_s16_acc(c1, q1[2], q1[3])));
    }
    *g0 = v0;
    *g1 = v1;
}

#endif /* MCU_KERNELS_INTERNAL_LSTM_S16_H */
