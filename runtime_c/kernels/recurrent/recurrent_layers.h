/* The bodies of the integer recurrent layers, each for int8 weights (s4 = 0: mcu_lstm_s8, mcu_gru_s8,
 * mcu_lstm_final_cell_s8) and packed 4-bit ones (s4 = 1: mcu_lstm_s4, mcu_gru_s4, mcu_lstm_final_cell_s4) with
 * the same arithmetic (their .c files state it); each kernel file inlines one with s4 constant. Internal.
 *
 * Always inlined: left to GCC's heuristics at -O2, a body was optimized on its own with s4 unknown and inlined
 * after, and the int8 kernels' dot loops came out with their operands spilled to the stack (mcu_gru_s8 72 B
 * larger, rnn_gru_hn 13 % more instructions); inlined first, each kernel compiles as if written for its width. */
#ifndef MCU_KERNELS_INTERNAL_RECURRENT_LAYERS_H
#define MCU_KERNELS_INTERNAL_RECURRENT_LAYERS_H

#include <string.h>

#include "mcu/kernels_s8.h"

#include "recurrent_s8.h"

/* One LSTM cell update, c' = f c + i g at the cell's 2^-cs, for hidden unit j from the i, f, g gate rows of
 * `gates`; returns c'. Shared so that mcu_lstm_s8's cell and mcu_lstm_final_cell_s8's agree bit for bit. */
static inline __attribute__((always_inline)) int32_t
mcu_lstm_cell_update(const int16_t *table, const int16_t *gates, int32_t hidden, int32_t j, int32_t cs, int32_t cell)
{
    const int32_t i = mcu_sigmoid_s16(table, gates[j]);
    const int32_t f = mcu_sigmoid_s16(table, gates[hidden + j]);
    const int32_t g = mcu_tanh_s16(table, gates[2 * hidden + j]);
    return mcu_sat_s16(mcu_round_shift(f * cell, 15) + mcu_round_shift(i * g, 30 - cs));
}

static inline __attribute__((always_inline)) mcu_status
mcu_lstm_run(int32_t s4, const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
             const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows,
             const int16_t *table, int8_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    const int32_t hidden = p->hidden;
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, output, 4,
                                  mcu_recurrent_scratch(p, 5)));
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
            mcu_recurrent_widen_any(s4, x, p->input_size, col_x);
            mcu_recurrent_widen_any(s4, h, hidden, col_h);
            mcu_recurrent_sum_rows(s4, p, 4 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gates);
            int8_t *y = output + step * (size_t)hidden;
            for (int32_t j = 0; j < hidden; ++j) {
                const int32_t c = mcu_lstm_cell_update(table, gates, hidden, j, cs, cell[j]);
                cell[j] = (int16_t)c;
                const int32_t o = mcu_sigmoid_s16(table, gates[3 * hidden + j]);
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

/* `state` [batch][hidden] int8 at the output's quantization, or NULL: the zero state (codes hidden_zp). */
static inline __attribute__((always_inline)) mcu_status
mcu_gru_run(int32_t s4, const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
            const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows,
            const int16_t *table, const int8_t *state, int8_t *output)
{
    MCU_REQUIRE(p != NULL, MCU_ERR_NULL_POINTER);
    const int32_t hidden = p->hidden;
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, output, 3,
                                  mcu_recurrent_scratch(p, 4)));
    int16_t *gates = (int16_t *)ctx->buf; /* r, z pre-activations, then the input part of n */
    int16_t *cand = gates + 3 * hidden;   /* Whn h + bhn */
    int16_t *col_x = cand + hidden;
    int16_t *col_h = col_x + p->input_size;
    int8_t *h = (int8_t *)(col_h + hidden);
    const int32_t cand_shift = p->state_shift + 15 - MCU_RECURRENT_GATE_FRAC;
    for (int32_t b = 0; b < p->batch; ++b) {
        if (state != NULL) {
            memcpy(h, state + (size_t)b * (size_t)hidden, (size_t)hidden);
        } else {
            memset(h, p->hidden_zp, (size_t)hidden);
        }
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int8_t *x = input + step * (size_t)p->input_size;
            mcu_recurrent_widen_any(s4, x, p->input_size, col_x);
            mcu_recurrent_widen_any(s4, h, hidden, col_h);
            for (int32_t r = 0; r < 3 * hidden; r += 2) {
                int32_t gx[2];
                int32_t gh[2];
                mcu_recurrent_rows2(s4, p, r, 3 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gx, gh);
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

static inline __attribute__((always_inline)) mcu_status
mcu_lstm_final_cell_run(int32_t s4, const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                        const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows,
                        const int16_t *table, const int8_t *hidden_states,
                        int16_t *cell_out)
{
    MCU_REQUIRE(p != NULL && cell_out != NULL, MCU_ERR_NULL_POINTER);
    const int32_t scratch = mcu_recurrent_scratch(p, 5);
    /* (the hidden states in the output's place: apart from the input and the scratch, as mcu_lstm_s8 wrote them) */
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, hidden_states, 4, scratch));
    const int32_t hidden = p->hidden;
    const size_t cell_bytes = (size_t)p->batch * (size_t)hidden * sizeof(int16_t);
    const size_t seq = (size_t)p->batch * (size_t)p->steps;
    MCU_REQUIRE(((uintptr_t)cell_out & 1u) == 0 &&
                    !mcu_overlaps(cell_out, cell_bytes, input, seq * (size_t)p->input_size) &&
                    !mcu_overlaps(cell_out, cell_bytes, hidden_states, seq * (size_t)hidden) &&
                    !mcu_overlaps(cell_out, cell_bytes, ctx->buf, (size_t)scratch) &&
                    !mcu_overlaps(cell_out, cell_bytes, rows, (size_t)(24 * hidden) * sizeof(int32_t)) &&
                    !mcu_overlaps(cell_out, cell_bytes, table, MCU_RECURRENT_S8_TABLE_SIZE * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    int16_t *gates = (int16_t *)ctx->buf;
    int16_t *col_x = gates + 5 * hidden; /* (mcu_lstm_s8's layout; its cell row is cell_out here) */
    int16_t *col_h = col_x + p->input_size;
    int8_t *zero_state = (int8_t *)(col_h + hidden);
    memset(zero_state, p->hidden_zp, (size_t)hidden);
    const int32_t cs = p->state_shift;
    for (int32_t b = 0; b < p->batch; ++b) {
        int16_t *cell = cell_out + (size_t)b * (size_t)hidden;
        memset(cell, 0, (size_t)hidden * sizeof(int16_t));
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int8_t *x = input + step * (size_t)p->input_size;
            const int8_t *h = t == 0 ? zero_state : hidden_states + (step - 1) * (size_t)hidden;
            mcu_recurrent_widen_any(s4, x, p->input_size, col_x);
            mcu_recurrent_widen_any(s4, h, hidden, col_h);
            /* the i, f and g rows */
            mcu_recurrent_sum_rows(s4, p, 3 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gates);
            for (int32_t j = 0; j < hidden; ++j) {
                cell[j] = (int16_t)mcu_lstm_cell_update(table, gates, hidden, j, cs, cell[j]);
            }
        }
    }
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_RECURRENT_LAYERS_H */
