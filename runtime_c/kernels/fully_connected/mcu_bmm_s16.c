/* Batched product of two int16 activations (w8a16: attention's scores and weighted values), CMSIS-NN's
 * arm_batch_matmul_s16: the exact 64-bit sum of a's row times b's column (|product| <= 2^30, k <= 2^16 terms),
 * requantized by the Q31 multiplier rounded to Q15 with one rounding step (mcu_requantize_s64), clamped.
 * arm_batch_matmul_s16 reads b transposed ([n][k]); the sums are exact, so reading b as [k][n] gives the same
 * codes (the tests compare with CMSIS-NN's kernel). mcu/reference/s16_norm.py computes the same. */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant_s16.h"

mcu_status mcu_bmm_s16(const mcu_bmm_s16_params *p, const int16_t *a, const int16_t *b, int16_t *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t out_dims[3] = {p->batch, p->m, p->n};
    const int32_t a_dims[2] = {p->m, p->k};
    const int32_t b_dims[2] = {p->k, p->n};
    MCU_REQUIRE(mcu_checked_count(out_dims, 3, 2) > 0 && mcu_checked_count(a_dims, 2, 2) > 0 &&
                    mcu_checked_count(b_dims, 2, 2) > 0 && p->k <= MCU_BMM_S16_MAX_K && p->a_batch_stride >= 0 &&
                    p->b_batch_stride >= 0 && (int64_t)(p->batch - 1) * p->a_batch_stride <= INT32_MAX / 2 &&
                    (int64_t)(p->batch - 1) * p->b_batch_stride <= INT32_MAX / 2,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_s16_valid(p->multiplier, p->shift) && mcu_act_s16_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    const size_t out_bytes = (size_t)p->batch * (size_t)p->m * (size_t)p->n * sizeof(int16_t);
    const size_t a_bytes =
        ((size_t)(p->batch - 1) * (size_t)p->a_batch_stride + (size_t)p->m * (size_t)p->k) * sizeof(int16_t);
    const size_t b_bytes =
        ((size_t)(p->batch - 1) * (size_t)p->b_batch_stride + (size_t)p->k * (size_t)p->n) * sizeof(int16_t);
    MCU_REQUIRE(!mcu_overlaps(a, a_bytes, output, out_bytes) && !mcu_overlaps(b, b_bytes, output, out_bytes),
                MCU_ERR_INVALID_ARG);
    const int32_t m15 = mcu_reduce_multiplier_q15(p->multiplier);
    const size_t k = (size_t)p->k, n = (size_t)p->n;
    for (int32_t bi = 0; bi < p->batch; ++bi) {
        const int16_t *ab = a + (size_t)bi * (size_t)p->a_batch_stride;
        const int16_t *bb = b + (size_t)bi * (size_t)p->b_batch_stride;
        int16_t *ob = output + (size_t)bi * (size_t)p->m * n;
        for (int32_t i = 0; i < p->m; ++i) {
            const int16_t *row = ab + (size_t)i * k;
            for (size_t j = 0; j < n; ++j) {
                int64_t acc = 0;
                const int16_t *col = bb + j;
                for (size_t t = 0; t < k; ++t) {
                    acc += (int32_t)row[t] * col[t * n];
                }
                ob[(size_t)i * n + j] = mcu_clamp_to_s16(mcu_requantize_s64(acc, m15, p->shift), p->act_min,
                                                         p->act_max);
            }
        }
    }
    return MCU_OK;
}
