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

/* The checks of both kernels. `seq` the hidden states [batch][steps][hidden] the final-cell kernel reads (NULL for
 * mcu_lstm_s16, which writes them to `out`); `out` what the kernel writes ([batch][steps][hidden], or the final
 * cell [batch][hidden] when `seq` is given), which overlaps no other operand nor the scratch of `scratch` bytes. */
static inline mcu_status mcu_lstm16_check(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                                          const int16_t *seq, const int16_t *state, const int16_t *cell,
                                          const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias,
                                          const int32_t *quant, const int16_t *out, int32_t scratch)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && w_ih != NULL && w_hh != NULL && bias != NULL &&
                    quant != NULL && out != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    int32_t counts[3];
    MCU_CHECK(mcu_rnn16_counts(p->batch, p->steps, p->input_size, p->hidden, counts));
    const int32_t in_count = counts[0], seq_count = counts[1], state_count = counts[2];
    MCU_REQUIRE(p->cell_shift >= 0 && p->cell_shift <= 15 && mcu_quant_valid(p->forget_mult, p->forget_shift) &&
                    mcu_quant_valid(p->input_mult, p->input_shift) && mcu_quant_valid(p->out_mult, p->out_shift),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(scratch > 0 && ctx->size >= scratch && ((uintptr_t)ctx->buf & 1u) == 0, MCU_ERR_BUFFER_TOO_SMALL);
    const size_t rows = 4u * (size_t)p->hidden;
    MCU_REQUIRE(mcu_rnn16_rows_valid(quant, rows), MCU_ERR_INVALID_ARG);
    const size_t out_n = (size_t)(seq != NULL ? state_count : seq_count);
    const size_t state_n = (size_t)state_count;
    const size_t sc = (size_t)scratch;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, out, out_n) &&
                    !(seq != NULL && mcu_overlaps(seq, (size_t)seq_count, out, out_n)) &&
                    !(seq != NULL && mcu_overlaps(ctx->buf, sc, seq, (size_t)seq_count)) &&
                    !(state != NULL && mcu_overlaps(state, state_n, out, out_n)) &&
                    !(cell != NULL && mcu_overlaps(cell, state_n, out, out_n)) &&
                    !(state != NULL && mcu_overlaps(ctx->buf, sc, state, state_n)) &&
                    !(cell != NULL && mcu_overlaps(ctx->buf, sc, cell, state_n)) &&
                    !mcu_overlaps(ctx->buf, sc, out, out_n) && !mcu_overlaps(ctx->buf, sc, input, (size_t)in_count) &&
                    !mcu_overlaps(w_ih, rows * (size_t)p->input_size, out, out_n) &&
                    !mcu_overlaps(w_hh, rows * (size_t)p->hidden, out, out_n) &&
                    !mcu_overlaps(bias, rows * sizeof(int64_t), out, out_n) &&
                    !mcu_overlaps(quant, rows * 4u * sizeof(int32_t), out, out_n),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
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
