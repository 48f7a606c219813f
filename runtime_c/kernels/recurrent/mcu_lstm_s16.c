/* One 16x8 LSTM layer with CMSIS-NN's arm_lstm_unidirectional_s16 arithmetic (TFLite Micro's integer LSTM
 * with int16 activations; mcu/reference/lstm_s16.py computes the same bit for bit). Per batch item, from
 * h = 0 and c = 0, per step t and hidden unit j, for the gate rows r of j (i, f, g, o):
 *
 *   pre_r = sat16(sat16(rq64(bias_r + W_ih[r] . x_t)) + rq64(W_hh[r] . h))      Q3.12 (no W_hh term at t = 0)
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
#include <string.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "../common/requant_s16.h"
#include "../common/simd_s8.h"

/* sigmoid(k / 24) in 0.16, each entry lowered by half its chord's error at the segment's midpoint, 65535 at
 * the end: the table of TFLite's int16 LOGISTIC and TANH, as mcu/reference/lstm_s16.py derives it (the
 * tests check this copy against it). */
static const uint16_t mcu_lstm_s16_table[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535
};

static inline int32_t sat16(int32_t v)
{
    return v > INT16_MAX ? INT16_MAX : v < INT16_MIN ? INT16_MIN : v;
}

/* arm_nn_activation_s16's table read: v the scaled input, idx_shift 9 (sigmoid) or 8 (tanh). */
static inline uint32_t table_read(uint32_t a, uint32_t idx_shift, uint32_t top)
{
    const uint32_t uh = a >> idx_shift;
    if (uh >= 255u) {
        return top;
    }
    const uint32_t ua = mcu_lstm_s16_table[uh];
    const uint32_t ub = mcu_lstm_s16_table[uh + 1u];
    return (ua << idx_shift) + (a & ((1u << idx_shift) - 1u)) * (ub - ua);
}

/* sigmoid of a Q3.12 gate, Q0.15 */
static inline int32_t sigmoid_q12(int32_t x)
{
    const int32_t v = x * 3;
    const uint32_t r = table_read(v > 0 ? (uint32_t)v : (uint32_t)-v, 9u, 0x7FFFu << 10);
    return (int16_t)((v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u) >> 10);
}

/* tanh of v / 2^12 for an input already times 3 (v = 3 x 2^ls), Q0.15; the unsigned wrap and the int16
 * conversion are CMSIS-NN's */
static inline int32_t tanh_scaled(int32_t v)
{
    const uint32_t r = table_read(v > 0 ? (uint32_t)v : (uint32_t)-v, 8u, 0xFFFFu << 8);
    const uint32_t u = v >= 0 ? r - (1u << 23) + (1u << 7) : (uint32_t)(-(int64_t)r + (1 << 23) + (1 << 7) - 1);
    return mcu_asr32(mcu_u32_to_s32((u >> 8) << 16), 16);
}

/* v in SXTB16's lane order, four values at a time: (v0, v2), (v1, v3) pair with the bytes of one weight word
 * (a tail of fewer than four stays in place); nothing to do on plain cores. */
static inline void lanes(const int16_t *v, int32_t n, int16_t *col)
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

/* w0 . v and w1 . v over n values (col: v in lanes()' order), exact: int32 partial sums of at most 256
 * products (each of magnitude at most 2^22) added in 64 bits, so the dual-MAC order changes nothing. */
static inline void dot2(const int8_t *w0, const int8_t *w1, const int16_t *v, const int16_t *col, int32_t n,
                        int64_t *a0, int64_t *a1)
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

int32_t mcu_lstm_s16_get_buffer_size(const mcu_lstm_s16_params *p)
{
    if (p == NULL || p->hidden <= 0 || p->hidden > MCU_LSTM_S16_MAX_FEATURES || p->input_size <= 0 ||
        p->input_size > MCU_LSTM_S16_MAX_FEATURES) {
        return 0;
    }
    return 2 * (2 * p->hidden + p->input_size);
}

static mcu_status check(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                        const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias, const int32_t *quant,
                        const int16_t *output)
{
    MCU_REQUIRE(ctx != NULL && p != NULL && input != NULL && w_ih != NULL && w_hh != NULL && bias != NULL &&
                    quant != NULL && output != NULL && ctx->buf != NULL,
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->batch > 0 && p->steps > 0 && p->input_size > 0 && p->hidden > 0 &&
                    p->input_size <= MCU_LSTM_S16_MAX_FEATURES && p->hidden <= MCU_LSTM_S16_MAX_FEATURES,
                MCU_ERR_SHAPE);
    const int32_t in_dims[3] = {p->batch, p->steps, p->input_size};
    const int32_t out_dims[3] = {p->batch, p->steps, p->hidden};
    const int32_t in_count = mcu_checked_count(in_dims, 3, 2);
    const int32_t out_count = mcu_checked_count(out_dims, 3, 2);
    MCU_REQUIRE(in_count > 0 && out_count > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->cell_shift >= 0 && p->cell_shift <= 15 && mcu_quant_valid(p->forget_mult, p->forget_shift) &&
                    mcu_quant_valid(p->input_mult, p->input_shift) && mcu_quant_valid(p->out_mult, p->out_shift),
                MCU_ERR_INVALID_ARG);
    const int32_t scratch = mcu_lstm_s16_get_buffer_size(p);
    MCU_REQUIRE(ctx->size >= scratch && ((uintptr_t)ctx->buf & 1u) == 0, MCU_ERR_BUFFER_TOO_SMALL);
    const size_t rows = 4u * (size_t)p->hidden;
    for (size_t r = 0; r < rows; ++r) {
        MCU_REQUIRE(mcu_quant_s16_valid(quant[4 * r], quant[4 * r + 1]) &&
                        mcu_quant_s16_valid(quant[4 * r + 2], quant[4 * r + 3]),
                    MCU_ERR_INVALID_ARG);
    }
    const size_t out_bytes = (size_t)out_count;
    MCU_REQUIRE(!mcu_overlaps(input, (size_t)in_count, output, out_bytes) &&
                    !mcu_overlaps(ctx->buf, (size_t)scratch, output, out_bytes) &&
                    !mcu_overlaps(ctx->buf, (size_t)scratch, input, (size_t)in_count) &&
                    !mcu_overlaps(w_ih, rows * (size_t)p->input_size, output, out_bytes) &&
                    !mcu_overlaps(w_hh, rows * (size_t)p->hidden, output, out_bytes) &&
                    !mcu_overlaps(bias, rows * sizeof(int64_t), output, out_bytes) &&
                    !mcu_overlaps(quant, rows * 4u * sizeof(int32_t), output, out_bytes),
                MCU_ERR_INVALID_ARG);
    return MCU_OK;
}

/* sat16(rq64(bias + w_ih[r] . x)) then, with a previous state, sat16(that + rq64(w_hh[r] . h)), for rows r0, r1 */
static inline void gate2(const mcu_lstm_s16_params *p, int32_t r0, int32_t r1, const int16_t *x,
                         const int16_t *col_x, const int16_t *h, const int16_t *col_h, const int8_t *w_ih,
                         const int8_t *w_hh, const int64_t *bias, const int32_t *quant, int32_t *g0, int32_t *g1)
{
    const int32_t *q0 = quant + 4 * r0;
    const int32_t *q1 = quant + 4 * r1;
    int64_t a0 = bias[r0];
    int64_t a1 = bias[r1];
    dot2(w_ih + (size_t)r0 * (size_t)p->input_size, w_ih + (size_t)r1 * (size_t)p->input_size, x, col_x,
         p->input_size, &a0, &a1);
    int32_t v0 = sat16(mcu_requantize_s16_acc(a0, q0[0], q0[1]));
    int32_t v1 = sat16(mcu_requantize_s16_acc(a1, q1[0], q1[1]));
    if (h != NULL) {
        int64_t c0 = 0;
        int64_t c1 = 0;
        dot2(w_hh + (size_t)r0 * (size_t)p->hidden, w_hh + (size_t)r1 * (size_t)p->hidden, h, col_h, p->hidden, &c0,
             &c1);
        v0 = sat16((int32_t)((int64_t)v0 + mcu_requantize_s16_acc(c0, q0[2], q0[3])));
        v1 = sat16((int32_t)((int64_t)v1 + mcu_requantize_s16_acc(c1, q1[2], q1[3])));
    }
    *g0 = v0;
    *g1 = v1;
}

/* mcu_requantize by one multiplier and shift, as one 64-bit multiply-add where the shift allows (requant_s16.h) */
typedef struct {
    mcu_rq_s32 fast;
    int32_t multiplier, shift, is_fast;
} rq_s32;

static inline void rq_init(rq_s32 *r, int32_t multiplier, int32_t shift)
{
    memset(r, 0, sizeof(*r));
    r->multiplier = multiplier;
    r->shift = shift;
    r->is_fast = mcu_rq_s32_init(&r->fast, multiplier, shift);
}

static inline int32_t rq(const rq_s32 *r, int32_t x)
{
    return r->is_fast ? mcu_rq_s32_apply(&r->fast, x) : mcu_requantize(x, r->multiplier, r->shift);
}

mcu_status mcu_lstm_s16(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                        const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias, const int32_t *quant,
                        int16_t *output)
{
    MCU_CHECK(check(ctx, p, input, w_ih, w_hh, bias, quant, output));
    const int32_t hidden = p->hidden;
    int16_t *cell = (int16_t *)ctx->buf;
    int16_t *col_x = cell + hidden;
    int16_t *col_h = col_x + p->input_size;
    /* the cell's tanh input times 3 * 2^(12 - cs): a multiplier, or a rounding shift right for cs > 12 */
    const int32_t ls = 12 - p->cell_shift;
    const int32_t c_mult = ls < 0 ? 3 : 3 << ls;
    const int32_t c_rshift = ls < 0 ? -ls : 0;
    const int32_t c_round = c_rshift > 0 ? 1 << (c_rshift - 1) : 0;
    rq_s32 to_cell_f, to_cell_i, to_hidden;
    rq_init(&to_cell_f, p->forget_mult, p->forget_shift);
    rq_init(&to_cell_i, p->input_mult, p->input_shift);
    rq_init(&to_hidden, p->out_mult, p->out_shift);
    for (int32_t b = 0; b < p->batch; ++b) {
        memset(cell, 0, (size_t)hidden * sizeof(int16_t));
        const int16_t *h = NULL;
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int16_t *x = input + step * (size_t)p->input_size;
            int16_t *y = output + step * (size_t)hidden;
            lanes(x, p->input_size, col_x);
            if (h != NULL) {
                lanes(h, hidden, col_h);
            }
            for (int32_t j = 0; j < hidden; ++j) {
                int32_t gi, gf, gg, go;
                gate2(p, j, hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gi, &gf);
                gate2(p, 2 * hidden + j, 3 * hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gg, &go);
                const int32_t i = sigmoid_q12(gi);
                const int32_t f = sigmoid_q12(gf);
                const int32_t g = tanh_scaled(gg * 3);
                const int32_t o = sigmoid_q12(go);
                int32_t c = sat16(rq(&to_cell_f, f * cell[j]));
                c = sat16(c + rq(&to_cell_i, i * g));
                cell[j] = (int16_t)c;
                const int32_t tc = tanh_scaled(mcu_asr32(c * c_mult + c_round, c_rshift));
                y[j] = (int16_t)sat16(rq(&to_hidden, o * tc));
            }
            h = y;
        }
    }
    return MCU_OK;
}
