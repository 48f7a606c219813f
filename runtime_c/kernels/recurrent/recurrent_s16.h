/* Shared pieces of the 16x8 recurrent layers (mcu_lstm_s16, mcu_gru_s16): CMSIS-NN's int16 sigmoid and tanh
 * (arm_nn_activation_s16, mcu/reference/lstm_s16.py), the exact int8 x int16 dot products of two gate rows
 * with their dual-MAC path, and the int32 requantization of the gates' products. Internal: static inline
 * only (the table: common/sigmoid_s16.h). */
#ifndef MCU_KERNELS_INTERNAL_RECURRENT_S16_H
#define MCU_KERNELS_INTERNAL_RECURRENT_S16_H

#include <stdint.h>
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"
#include "../common/sigmoid_s16.h"
#include "../common/simd_s8.h"


static inline int32_t mcu_rnn16_sat(int32_t v)
{
    return v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : v;
}

/* arm_nn_activation_s16's table read: v the scaled input, idx_shift 9 (sigmoid) or 8 (tanh). */
static inline uint32_t mcu_rnn16_table_read(uint32_t a, uint32_t idx_shift, uint32_t top)
{
    const uint32_t uh = a >> idx_shift;
    if (uh >= 255u) {
        return top;
    }
    const uint32_t ua = mcu_sigmoid_s16_table[uh];
    const uint32_t ub = mcu_sigmoid_s16_table[uh + 1u];
    return (ua << idx_shift) + (a & ((1u << idx_shift) - 1u)) * (ub - ua);
}

/* sigmoid of a Q3.12 gate, Q0.15 */
static inline int32_t mcu_rnn16_sigmoid(int32_t x)
{
    const int32_t v = x * 3;
    const uint32_t r = mcu_rnn16_table_read(v > 0 ? (uint32_t)v : (uint32_t)-v, 9u, 0x7FFFu << 10);
    return (int16_t)((v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u) >> 10);
}

/* tanh of v / 2^12 for an input already times 3 (v = 3 x 2^ls), Q0.15; the unsigned wrap and the int16
 * conversion are CMSIS-NN's */
static inline int32_t mcu_rnn16_tanh(int32_t v)
{
    const uint32_t r = mcu_rnn16_table_read(v > 0 ? (uint32_t)v : (uint32_t)-v, 8u, 0xFFFFu << 8);
    const uint32_t u = v >= 0 ? r - (1u << 23) + (1u << 7) : (uint32_t)(-(int64_t)r + (1 << 23) + (1 << 7) - 1);
    return mcu_asr32(mcu_u32_to_s32((u >> 8) << 16), 16);
}

/* v in SXTB16's lane order, four values at a time: (v0, v2), (v1, v3) pair with the bytes of one weight word
 * (a tail of fewer than four stays in place); nothing to do on plain cores. */
static inline void mcu_rnn16_lanes(const int16_t *v, int32_t n, int16_t *col)
{
#if MCU_S8_DSP
    int32_t k = 0;
    for (; k + 4 <= n; k += 4) {
        col[k] = v[k];
        col[k + 1] = v[k + 2];
        col[k + 2] = v[k + 1];
        col[k + 3] = v[k + 3];
    }
    for (; k < n; ++k) {
        col[k] = v[k];
    }
#else
    (void)v;
    (void)n;
    (void)col;
#endif
}

/* w0 . v and w1 . v over n values (col: v in mcu_rnn16_lanes' order), exact: int32 partial sums of at most 256
 * products (each of magnitude at most 2^22) added in 64 bits, so the dual-MAC order changes nothing. */
static inline void mcu_rnn16_dot2(const int8_t *w0, const int8_t *w1, const int16_t *v, const int16_t *col,
                                  int32_t n, int64_t *a0, int64_t *a1)
{
    int32_t k = 0;
    while (k < n) {
        const int32_t end = n - k > 256 ? k + 256 : n;
        int32_t s0 = 0;
        int32_t s1 = 0;
#if MCU_S8_DSP
        uint32_t u0 = 0;
        uint32_t u1 = 0;
        for (; k + 4 <= end; k += 4) {
            const uint32_t c02 = mcu_load_u32(col + k);
            const uint32_t c13 = mcu_load_u32(col + k + 2);
            const uint32_t v0 = mcu_load_u32(w0 + k);
            const uint32_t v1 = mcu_load_u32(w1 + k);
            u0 = mcu_smlad(mcu_sxtb16(v0), c02, u0);
            u1 = mcu_smlad(mcu_sxtb16(v1), c02, u1);
            u0 = mcu_smlad(mcu_sxtb16_ror8(v0), c13, u0);
            u1 = mcu_smlad(mcu_sxtb16_ror8(v1), c13, u1);
        }
        s0 = mcu_u32_to_s32(u0);
        s1 = mcu_u32_to_s32(u1);
#else
        (void)col;
#endif
        for (; k < end; ++k) {
            const int32_t x = v[k];
            s0 += x * w0[k];
            s1 += x * w1[k];
        }
        *a0 += s0;
        *a1 += s1;
    }
}

/* mcu_requantize by one multiplier and shift, as one 64-bit multiply-add where the shift allows (requant_s16.h) */
typedef struct {
    mcu_rq_s32 fast;
    int32_t multiplier, shift, is_fast;
} mcu_rnn16_rq;

static inline void mcu_rnn16_rq_init(mcu_rnn16_rq *r, int32_t multiplier, int32_t shift)
{
    memset(r, 0, sizeof(*r));
    r->multiplier = multiplier;
    r->shift = shift;
    r->is_fast = mcu_rq_s32_init(&r->fast, multiplier, shift);
}

static inline int32_t mcu_rnn16_rq_apply(const mcu_rnn16_rq *r, int32_t x)
{
    return r->is_fast ? mcu_rq_s32_apply(&r->fast, x) : mcu_requantize(x, r->multiplier, r->shift);
}

/* Whether every gate row's two requantizations (input and recurrent products: multiplier, shift, multiplier,
 * shift a row) are valid 16x8 ones. */
static inline int mcu_rnn16_rows_valid(const int32_t *quant, size_t rows)
{
    for (size_t r = 0; r < rows; ++r) {
        if (!mcu_quant_s16_valid(quant[4 * r], quant[4 * r + 1]) ||
            !mcu_quant_s16_valid(quant[4 * r + 2], quant[4 * r + 3])) {
            return 0;
        }
    }
    return 1;
}

/* The element counts of a layer's input [batch][steps][input_size], hidden states [batch][steps][hidden] and state
 * [batch][hidden] in counts[0..2]; MCU_ERR_SHAPE for sizes out of range or counts past int32. */
static inline mcu_status mcu_rnn16_counts(int32_t batch, int32_t steps, int32_t input_size, int32_t hidden,
                                          int32_t counts[3])
{
    MCU_REQUIRE(batch > 0 && steps > 0 && input_size > 0 && hidden > 0 && input_size <= MCU_LSTM_S16_MAX_FEATURES &&
                    hidden <= MCU_LSTM_S16_MAX_FEATURES,
                MCU_ERR_SHAPE);
    const int32_t in_dims[3] = {batch, steps, input_size};
    const int32_t seq_dims[3] = {batch, steps, hidden};
    const int32_t state_dims[2] = {batch, hidden};
    counts[0] = mcu_checked_count(in_dims, 3, 2);
    counts[1] = mcu_checked_count(seq_dims, 3, 2);
    counts[2] = mcu_checked_count(state_dims, 2, 2);
    MCU_REQUIRE(counts[0] > 0 && counts[1] > 0 && counts[2] > 0, MCU_ERR_SHAPE);
    return MCU_OK;
}

/* A layer's operands as mcu_rnn16_check reads them: `seq` the hidden states [batch][steps][hidden] a kernel reads
 * (NULL where it writes them to `out`), `state` and `cell` [batch][hidden] or NULL, `out` what the kernel writes:
 * [batch][steps][hidden], or [batch][hidden] when `seq` is given. */
typedef struct {
    int32_t batch, steps, input_size, hidden;
    int32_t gates;      /* weight and quant rows per hidden unit: 4 (LSTM), 3 (GRU) */
    int32_t bias_units; /* int64 biases per hidden unit: the LSTM's 4 rows, the GRU's 3 and the n rows of w_hh */
    int32_t scratch;    /* the bytes of ctx->buf the kernel uses */
    const int16_t *input, *seq, *state, *cell;
    const int8_t *w_ih, *w_hh;
    const int64_t *bias;
    const int32_t *quant;
    const int16_t *out;
} mcu_rnn16_operands;

/* The checks the 16x8 LSTM and GRU share, in this order: the pointers (MCU_ERR_NULL_POINTER), the sizes
 * (MCU_ERR_SHAPE), the layer's own parameters (`params_ok`, MCU_ERR_INVALID_ARG), the scratch
 * (MCU_ERR_BUFFER_TOO_SMALL), each row's requantization and `out` apart from every other operand and the scratch
 * (MCU_ERR_INVALID_ARG). */
static inline mcu_status mcu_rnn16_check(const mcu_context *ctx, const mcu_rnn16_operands *o, int params_ok)
{
    MCU_REQUIRE(ctx != NULL && o->input != NULL && o->w_ih != NULL && o->w_hh != NULL && o->bias != NULL &&
                    o->quant != NULL && o->out != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    int32_t counts[3];
    MCU_CHECK(mcu_rnn16_counts(o->batch, o->steps, o->input_size, o->hidden, counts));
    const size_t in_n = (size_t)counts[0], seq_n = (size_t)counts[1], state_n = (size_t)counts[2];
    MCU_REQUIRE(params_ok, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(o->scratch > 0 && ctx->size >= o->scratch && ((uintptr_t)ctx->buf & 1u) == 0,
                MCU_ERR_BUFFER_TOO_SMALL);
    const size_t rows = (size_t)o->gates * (size_t)o->hidden;
    MCU_REQUIRE(mcu_rnn16_rows_valid(o->quant, rows), MCU_ERR_INVALID_ARG);
    const size_t out_n = o->seq != NULL ? state_n : seq_n;
    const size_t sc = (size_t)o->scratch;
    const void *out = o->out, *buf = ctx->buf;
    MCU_REQUIRE(!mcu_overlaps(o->input, in_n, out, out_n) &&
                    !(o->seq != NULL && mcu_overlaps(o->seq, seq_n, out, out_n)) &&
                    !(o->seq != NULL && mcu_overlaps(buf, sc, o->seq, seq_n)) &&
                    !(o->state != NULL && mcu_overlaps(o->state, state_n, out, out_n)) &&
                    !(o->cell != NULL && mcu_overlaps(o->cell, state_n, out, out_n)) &&
                    !(o->state != NULL && mcu_overlaps(buf, sc, o->state, state_n)) &&
                    !(o->cell != NULL && mcu_overlaps(buf, sc, o->cell, state_n)) &&
                    !mcu_overlaps(buf, sc, out, out_n) && !mcu_overlaps(buf, sc, o->input, in_n) &&
                    !mcu_overlaps(o->w_ih, rows * (size_t)o->input_size, out, out_n) &&
                    !mcu_overlaps(o->w_hh, rows * (size_t)o->hidden, out, out_n) &&
                    !mcu_overlaps(o->bias, (size_t)o->bias_units * (size_t)o->hidden * sizeof(int64_t), out, out_n) &&
                    !mcu_overlaps(o->quant, rows * 4u * sizeof(int32_t), out, out_n),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_RECURRENT_S16_H */
