/* Shared pieces of the 16x8 recurrent layers (mcu_lstm_s16, mcu_gru_s16): CMSIS-NN's int16 sigmoid and tanh
 * (arm_nn_activation_s16, mcu/reference/lstm_s16.py), the exact int8 x int16 dot products of two gate rows
 * with their dual-MAC path, and the int32 requantization of the gates' products. Internal: static inline
 * only, and the table static: a firmware with both layers holds it twice (512 bytes each). */
#ifndef MCU_KERNELS_INTERNAL_RECURRENT_S16_H
#define MCU_KERNELS_INTERNAL_RECURRENT_S16_H

#include <stdint.h>
#include <string.h>

#include "../common/requant.h"
#include "../common/requant_s16.h"
#include "../common/simd_s8.h"

/* sigmoid(k / 24) in 0.16, each entry lowered by half its chord's error at the segment's midpoint, 65535 at
 * the end: the table of TFLite's int16 LOGISTIC and TANH, as mcu/reference/lstm_s16.py derives it (the
 * tests check this copy against it). */
static const uint16_t mcu_rnn16_table[256] = {
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
    const uint32_t ua = mcu_rnn16_table[uh];
    const uint32_t ub = mcu_rnn16_table[uh + 1u];
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

#endif /* MCU_KERNELS_INTERNAL_RECURRENT_S16_H */
