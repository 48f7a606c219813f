/* Shared pieces of the integer recurrent layers (mcu_lstm_s8, mcu_gru_s8, and their 4-bit weight forms
 * mcu_lstm_s4, mcu_gru_s4); mcu/quant/recurrent.py mirrors every function here. Internal: static inline only.
 *
 * The 4-bit forms take each matrix packed two a byte, continuous across rows (CMSIS-NN's s4 layout, element 2i
 * in the low nibble of byte i), so a row of odd length starts mid-byte every other row. Their products run on
 * the packed weights step by step: widening the matrices once per call would cost the layer's whole int8 weight
 * bytes of RAM (4H (I + H) for an LSTM), the very bytes 4-bit weights save, against a few ALU instructions per
 * 4 weights. Every function taking `s4` is inlined with it constant, so the int8 kernels keep their code.
 *
 * Gate pre-activations are int16 Q3.12; sigmoid and tanh give Q0.15 from a 257-entry table
 * T[k] = round(2^15 sigmoid(k / 32)) read at |x| / 2^7 (tanh: at 2|x|, saturating at T[256]) with linear
 * interpolation on the 7 bits below, and the symmetries sigmoid(-x) = 1 - sigmoid(x), tanh(-x) = -tanh(x). */
#ifndef MCU_KERNELS_INTERNAL_RECURRENT_S8_H
#define MCU_KERNELS_INTERNAL_RECURRENT_S8_H

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/s4.h"
#include "../common/simd_s8.h"

#define MCU_RECURRENT_GATE_FRAC 12

static inline int32_t mcu_sat_s16(int32_t v)
{
    return v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : v;
}

/* round(v / 2^s), ties up (floor((v + 2^(s-1)) / 2^s)), s in [0, 31]; v + 2^(s-1) must not overflow. */
static inline int32_t mcu_round_shift(int32_t v, int32_t s)
{
    return s == 0 ? v : mcu_asr32(v + ((int32_t)1 << (s - 1)), s);
}

/* T at a / 2^idx_shift, interpolated on the idx_shift bits below (scaled to 7 bits); a >= 0. */
static inline int32_t mcu_recurrent_lookup(const int16_t *table, int32_t a, int32_t idx_shift)
{
    const int32_t idx = a >> idx_shift;
    if (idx >= MCU_RECURRENT_S8_TABLE_SIZE - 1) {
        return table[MCU_RECURRENT_S8_TABLE_SIZE - 1];
    }
    const int32_t frac = (a & ((1 << idx_shift) - 1)) << (7 - idx_shift);
    const int32_t lo = table[idx];
    return lo + (((table[idx + 1] - lo) * frac + 64) >> 7); /* the table increases: a non-negative shift */
}

static inline int32_t mcu_sigmoid_s16(const int16_t *table, int32_t x)
{
    const int32_t s = mcu_recurrent_lookup(table, x < 0 ? -x : x, 7);
    return x >= 0 ? s : 32768 - s;
}

static inline int32_t mcu_tanh_s16(const int16_t *table, int32_t x)
{
    const int32_t t = 2 * mcu_recurrent_lookup(table, x < 0 ? -x : x, 6) - 32768;
    return x >= 0 ? t : -t;
}

/* Scratch bytes: int16 gates [gates * H] and state [state * H], the step's input and hidden state widened
 * to int16 [I] and [H] (the dual-MAC path's operands), the int8 hidden state [H]. */
static inline int32_t mcu_recurrent_scratch(const mcu_recurrent_s8_params *p, int32_t halfwords_per_hidden)
{
    if (p == NULL || p->hidden <= 0 || p->hidden > MCU_RECURRENT_S8_MAX_FEATURES || p->input_size <= 0 ||
        p->input_size > MCU_RECURRENT_S8_MAX_FEATURES) {
        return 0;
    }
    return 2 * halfwords_per_hidden * p->hidden + 2 * (p->input_size + p->hidden) + p->hidden;
}

/* The step's int8 vector as SMLAD operands (mcu_expand_s8's order); nothing to do on plain cores. */
static inline void mcu_recurrent_widen(const int8_t *q, int32_t n, int16_t *col)
{
#if MCU_S8_DSP
    mcu_expand_s8(q, n, 0, col);
#else
    (void)q;
    (void)n;
    (void)col;
#endif
}

/* mcu_requantize(acc, multiplier, shift) for a multiplier in [0, 2^31 - 1], in one 64-bit product and one
 * shift when shift <= 0. With P = acc * multiplier and R = -shift >= 1, rounding_divide_by_pot(y, R) of
 * y = floor((P + 2^30) / 2^31) is floor((y + 2^(R-1) - [y < 0]) / 2^R), and nested floors of integer sums
 * merge: floor((P + 2^30 + 2^(R+30) - [y < 0] 2^31) / 2^(31+R)). [y < 0] may be [acc < 0]: they differ
 * only where y == 0, and there both give 0. |P| < 2^62 and R <= 31 keep the sum inside int64. */
static inline int32_t mcu_recurrent_rq(int32_t acc, int32_t multiplier, int32_t shift)
{
    if (shift > 0) {
        return mcu_requantize(acc, multiplier, shift);
    }
    const int64_t prod = (int64_t)acc * multiplier;
    if (shift == 0) {
        return (int32_t)mcu_asr64(prod + ((int64_t)1 << 30), 31);
    }
    /* K = 2^30 + 2^(R+30) - [acc < 0] 2^31 built from 32-bit words, and floor(s / 2^(31+R)) as the high
     * word of s shifted right by R - 1: no variable 64-bit shift */
    const int32_t r = -shift;
    const uint32_t lo = (1u << 30) | (r == 1 ? 1u << 31 : 0u);
    const int32_t hi = r >= 2 ? (int32_t)1 << (r - 2) : 0;
    const int64_t k = (int64_t)hi * 4294967296 + (int64_t)lo - (acc < 0 ? ((int64_t)1 << 31) : 0);
    return mcu_asr32((int32_t)mcu_asr64(prod + k, 32), r - 1);
}

/* sum(w0 * q) and sum(w1 * q) over n int8 pairs (q also widened in col) added to a[0] and a[1]; on DSP
 * cores two rows share each load of the widened vector. |bias| <= 2^30 and n <= 4096 keep every int32 sum
 * exact, so the dual-MAC order changes nothing. */
static inline void mcu_recurrent_dot2(const int8_t *w0, const int8_t *w1, const int8_t *q, const int16_t *col,
                                      int32_t n, int32_t *a)
{
    int32_t k = 0;
#if MCU_S8_DSP
    uint32_t s0 = 0;
    uint32_t s1 = 0;
    for (; k + 4 <= n; k += 4) {
        const uint32_t c02 = mcu_load_u32(col + k);
        const uint32_t c13 = mcu_load_u32(col + k + 2);
        const uint32_t v0 = mcu_load_u32(w0 + k);
        const uint32_t v1 = mcu_load_u32(w1 + k);
        s0 = mcu_smlad(mcu_sxtb16(v0), c02, s0);
        s1 = mcu_smlad(mcu_sxtb16(v1), c02, s1);
        s0 = mcu_smlad(mcu_sxtb16_ror8(v0), c13, s0);
        s1 = mcu_smlad(mcu_sxtb16_ror8(v1), c13, s1);
    }
    int32_t x0 = mcu_u32_to_s32(s0);
    int32_t x1 = mcu_u32_to_s32(s1);
#else
    (void)col;
    int32_t x0 = 0;
    int32_t x1 = 0;
#endif
    for (; k < n; ++k) {
        x0 += (int32_t)w0[k] * q[k];
        x1 += (int32_t)w1[k] * q[k];
    }
    a[0] += x0;
    a[1] += x1;
}

/* The step's int8 vector as the 4-bit path's SMLAD operands: each whole group of 8 as the pairs (q0, q4),
 * (q1, q5), (q2, q6), (q3, q7), the order SXTB16 widens 8 packed weights in (the tail is read from q). */
static inline void mcu_recurrent_widen_s4(const int8_t *q, int32_t n, int16_t *col)
{
#if MCU_S8_DSP
    for (int32_t k = 0; k + 8 <= n; k += 8) {
        for (int32_t j = 0; j < 8; ++j) {
            col[k + 2 * (j & 3) + (j >> 2)] = q[k + j];
        }
    }
#else
    (void)q;
    (void)n;
    (void)col;
#endif
}

#if MCU_S8_DSP
/* 8 packed weights from element e on (any nibble), element e + j in bits 4j..4j+3: an odd start also reads the
 * byte that holds element e + 7, and no further. */
static inline uint32_t mcu_recurrent_s4_word(const int8_t *w, int32_t e)
{
    const int8_t *b = w + (e >> 1);
    const uint32_t v = mcu_load_u32(b);
    return (e & 1) ? (v >> 4) | ((uint32_t)(uint8_t)b[4] << 28) : v;
}

/* s += 16 times the dot product of 8 packed weights v with their column group c (mcu_recurrent_widen_s4's
 * order): masked with 0xF0F0F0F0, as it is and shifted left by 4, every nibble sits in the top of its own byte,
 * so SXTB16 and SXTB16 ror 8 widen 16 (w0, w4), (w1, w5), (w2, w6), (w3, w7) with no shift of a signed value. */
static inline uint32_t mcu_recurrent_s4_mac8(uint32_t v, const int16_t *c, uint32_t s)
{
    const uint32_t lo = 0xF0F0F0F0u & (v << 4);
    const uint32_t hi = 0xF0F0F0F0u & v;
    s = mcu_smlad(mcu_sxtb16(lo), mcu_load_u32(c), s);
    s = mcu_smlad(mcu_sxtb16(hi), mcu_load_u32(c + 2), s);
    s = mcu_smlad(mcu_sxtb16_ror8(lo), mcu_load_u32(c + 4), s);
    return mcu_smlad(mcu_sxtb16_ror8(hi), mcu_load_u32(c + 6), s);
}

#else
/* 4 packed weights from element e on (any nibble), element e + j in bits 4j..4j+3: an odd start also reads the
 * byte that holds element e + 3, and no further. */
static inline uint32_t mcu_recurrent_s4_window(const int8_t *w, int32_t e)
{
    const uint8_t *b = (const uint8_t *)w + (e >> 1);
    const uint32_t lo = (uint32_t)b[0] | ((uint32_t)b[1] << 8);
    return (e & 1) ? (lo | ((uint32_t)b[2] << 16)) >> 4 : lo;
}

/* The dot product of 4 window weights plus 8 (u = w + 8 in [0, 15]: t ^ 0x8888, no sign extension) with q. */
static inline int32_t mcu_recurrent_s4_dot4(uint32_t t, const int8_t *q)
{
    const uint32_t u = t ^ 0x8888u;
    return (int32_t)(u & 15u) * q[0] + (int32_t)((u >> 4) & 15u) * q[1] + (int32_t)((u >> 8) & 15u) * q[2] +
           (int32_t)((u >> 12) & 15u) * q[3];
}
#endif

/* mcu_recurrent_dot2 with 4-bit rows starting at elements e0 and e1 of the packed matrix w. The DSP path's
 * 16 w q sums stay exact (|w| <= 8, |q| <= 128, n <= 4096: below 2^26), so the shift by 4 returns the sums. */
static inline void mcu_recurrent_dot2_s4(const int8_t *w, int32_t e0, int32_t e1, const int8_t *q, const int16_t *col,
                                         int32_t n, int32_t *a)
{
    int32_t k = 0;
#if MCU_S8_DSP
    uint32_t s0 = 0;
    uint32_t s1 = 0;
    for (; k + 8 <= n; k += 8) {
        s0 = mcu_recurrent_s4_mac8(mcu_recurrent_s4_word(w, e0 + k), col + k, s0);
        s1 = mcu_recurrent_s4_mac8(mcu_recurrent_s4_word(w, e1 + k), col + k, s1);
    }
    int32_t x0 = mcu_asr32(mcu_u32_to_s32(s0), 4);
    int32_t x1 = mcu_asr32(mcu_u32_to_s32(s1), 4);
#else
    (void)col;
    int32_t x0 = 0;
    int32_t x1 = 0;
    int32_t sq = 0; /* sum (w + 8) q - 8 sum q: the sum of q serves both rows */
    for (; k + 4 <= n; k += 4) { /* 4 weights from 2 or 3 byte loads, no per-weight byte address */
        x0 += mcu_recurrent_s4_dot4(mcu_recurrent_s4_window(w, e0 + k), q + k);
        x1 += mcu_recurrent_s4_dot4(mcu_recurrent_s4_window(w, e1 + k), q + k);
        sq += q[k] + q[k + 1] + q[k + 2] + q[k + 3];
    }
    x0 -= 8 * sq;
    x1 -= 8 * sq;
#endif
    for (; k < n; ++k) {
        x0 += mcu_s4_at(w, e0 + k) * q[k];
        x1 += mcu_s4_at(w, e1 + k) * q[k];
    }
    a[0] += x0;
    a[1] += x1;
}

/* The step's vector widened as the int8 (mcu_recurrent_widen) or the 4-bit path (s4) reads it. */
static inline void mcu_recurrent_widen_any(int32_t s4, const int8_t *q, int32_t n, int16_t *col)
{
    if (s4) {
        mcu_recurrent_widen_s4(q, n, col);
    } else {
        mcu_recurrent_widen(q, n, col);
    }
}

/* The dot products of rows r and r1 of an [rows][n] matrix, int8 or (s4) packed 4-bit. */
static inline void mcu_recurrent_dot_rows(int32_t s4, const int8_t *w, int32_t r, int32_t r1, const int8_t *q,
                                          const int16_t *col, int32_t n, int32_t *a)
{
    if (s4) {
        mcu_recurrent_dot2_s4(w, r * n, r1 * n, q, col, n, a);
    } else {
        mcu_recurrent_dot2(w + (size_t)r * (size_t)n, w + (size_t)r1 * (size_t)n, q, col, n, a);
    }
}

/* The input and recurrent products of gate rows r and r + 1 (r + 1 < n_rows, or row r twice at the end),
 * each requantized and saturated to int16: gx[i], gh[i] for row r + i. */
static inline void mcu_recurrent_rows2(int32_t s4, const mcu_recurrent_s8_params *p, int32_t r, int32_t n_rows,
                                       const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int8_t *x,
                                       const int16_t *col_x, const int8_t *h, const int16_t *col_h, int32_t gx[2],
                                       int32_t gh[2])
{
    const int32_t r1 = r + 1 < n_rows ? r + 1 : r;
    const int32_t *q0 = rows + 6 * r;
    const int32_t *q1 = rows + 6 * r1;
    int32_t ax[2] = {q0[0], q1[0]};
    int32_t ah[2] = {q0[3], q1[3]};
    mcu_recurrent_dot_rows(s4, w_ih, r, r1, x, col_x, p->input_size, ax);
    mcu_recurrent_dot_rows(s4, w_hh, r, r1, h, col_h, p->hidden, ah);
    gx[0] = mcu_sat_s16(mcu_recurrent_rq(ax[0], q0[1], q0[2]));
    gx[1] = mcu_sat_s16(mcu_recurrent_rq(ax[1], q1[1], q1[2]));
    gh[0] = mcu_sat_s16(mcu_recurrent_rq(ah[0], q0[4], q0[5]));
    gh[1] = mcu_sat_s16(mcu_recurrent_rq(ah[1], q1[4], q1[5]));
}

/* The first n_rows gate rows of one step (an LSTM's i, f, g and o, or i, f and g only for its final cell), each
 * the saturated sum of its input and recurrent products, into `gates`, two rows a pass. */
static inline void mcu_recurrent_sum_rows(int32_t s4, const mcu_recurrent_s8_params *p, int32_t n_rows, const int8_t *w_ih,
                                          const int8_t *w_hh, const int32_t *rows, const int8_t *x,
                                          const int16_t *col_x, const int8_t *h, const int16_t *col_h,
                                          int16_t *gates)
{
    for (int32_t r = 0; r < n_rows; r += 2) {
        int32_t gx[2];
        int32_t gh[2];
        mcu_recurrent_rows2(s4, p, r, n_rows, w_ih, w_hh, rows, x, col_x, h, col_h, gx, gh);
        gates[r] = (int16_t)mcu_sat_s16(gx[0] + gh[0]);
        if (r + 1 < n_rows) {
            gates[r + 1] = (int16_t)mcu_sat_s16(gx[1] + gh[1]);
        }
    }
}

/* The checks both kernels make; `gates` is 4 (LSTM) or 3 (GRU). */
static inline mcu_status mcu_recurrent_check(const mcu_context *ctx, const mcu_recurrent_s8_params *p,
                                             const int8_t *input, const int8_t *w_ih, const int8_t *w_hh,
                                             const int32_t *rows, const int16_t *table, const int8_t *output,
                                             int32_t gates, int32_t scratch)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && w_ih != NULL && w_hh != NULL && rows != NULL &&
                    table != NULL && output != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->batch > 0 && p->steps > 0 && p->input_size > 0 && p->hidden > 0 &&
                    p->input_size <= MCU_RECURRENT_S8_MAX_FEATURES && p->hidden <= MCU_RECURRENT_S8_MAX_FEATURES,
                MCU_ERR_SHAPE);
    const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
    const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
    const int32_t in_count = mcu_checked_count(in_dims, 3, 1);
    const int32_t out_count = mcu_checked_count(out_dims, 3, 1);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_output_offset_valid(p->hidden_zp) && mcu_quant_valid(p->out_mult, p->out_shift) &&
                    p->state_shift >= 0 && p->state_shift <= 15,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(ctx->size >= scratch && ((uintptr_t)ctx->buf & 1u) == 0, MCU_ERR_BUFFER_TOO_SMALL);
    for (int32_t r = 0; r < gates * p->hidden; ++r) {
        const int32_t *q = rows + 6 * r;
        MCU_REQUIRE(q[0] >= -MCU_RECURRENT_S8_MAX_BIAS && q[0] <= MCU_RECURRENT_S8_MAX_BIAS &&
                        q[3] >= -MCU_RECURRENT_S8_MAX_BIAS && q[3] <= MCU_RECURRENT_S8_MAX_BIAS &&
                        mcu_quant_valid(q[1], q[2]) && mcu_quant_valid(q[4], q[5]),
                    MCU_ERR_INVALID_ARG);
    }
    for (int32_t k = 0; k < MCU_RECURRENT_S8_TABLE_SIZE; ++k) { /* increasing in [0, 2^15) */
        MCU_REQUIRE(table[k] >= 0 && (k == 0 || table[k] >= table[k - 1]), MCU_ERR_INVALID_ARG);
    }
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, (size_t)out_count) &&
                    !mcu_overlaps(ctx->buf, (size_t)scratch, output, (size_t)out_count) &&
                    !mcu_overlaps(ctx->buf, (size_t)scratch, input, (size_t)in_count),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

#endif /* MCU_KERNELS_INTERNAL_RECURRENT_S8_H */
