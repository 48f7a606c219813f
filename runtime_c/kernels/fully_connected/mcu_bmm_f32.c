/* Batched matrix product out[b] = a[b] (m x k) * b[b] (k x n), row-major, float32 accumulation in
 * k order. A batch stride of 0 reuses one matrix for every batch (a broadcast operand). */
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

mcu_status mcu_bmm_f32(const mcu_bmm_f32_params *p, const float *a, const float *b, float *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(p->batch > 0 && p->m > 0 && p->k > 0 && p->n > 0 && p->a_batch_stride >= 0 &&
                    p->b_batch_stride >= 0,
                MCU_ERR_SHAPE);
    MCU_REQUIRE((int64_t)p->batch * p->m * p->n <= INT32_MAX / (int32_t)sizeof(float), MCU_ERR_SHAPE);
    const size_t out_bytes = (size_t)p->batch * (size_t)p->m * (size_t)p->n * sizeof(float);
    const size_t a_bytes = ((size_t)(p->batch - 1) * (size_t)p->a_batch_stride + (size_t)p->m * (size_t)p->k) *
                           sizeof(float);
    const size_t b_bytes = ((size_t)(p->batch - 1) * (size_t)p->b_batch_stride + (size_t)p->k * (size_t)p->n) *
                           sizeof(float);
    MCU_REQUIRE(!mcu_overlaps(a, a_bytes, output, out_bytes) && !mcu_overlaps(b, b_bytes, output, out_bytes),
                MCU_ERR_INVALID_ARG);
    for (int32_t bi = 0; bi < p->batch; ++bi) {
        const float *ab = a + (size_t)bi * (size_t)p->a_batch_stride;
        const float *bb = b + (size_t)bi * (size_t)p->b_batch_stride;
        float *ob = output + (size_t)bi * (size_t)p->m * (size_t)p->n;
        for (int32_t i = 0; i < p->m; ++i) {
            for (int32_t j = 0; j < p->n; ++j) {
                float acc = 0.0f;
                for (int32_t t = 0; t < p->k; ++t) {
                    acc += ab[(size_t)i * (size_t)p->k + (size_t)t] * bb[(size_t)t * (size_t)p->n + (size_t)j];
                }
                ob[(size_t)i * (size_t)p->n + (size_t)j] = acc;
            }
        }
    }
    return MCU_OK;
}
