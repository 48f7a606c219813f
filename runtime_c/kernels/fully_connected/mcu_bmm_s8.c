/* Batched product of two int8 activations (attention's scores and weighted values): the int32 sum
 * of (a + a_offset)(b + b_offset) over k in order, then one requantization (mcu_requantize_to_s8).
 * |a + a_offset|, |b + b_offset| <= 255, so k <= 32768 terms fit int32 exactly. */
#include <stddef.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/requant.h"

mcu_status mcu_bmm_s8(const mcu_bmm_s8_params *p, const int8_t *a, const int8_t *b, int8_t *output)
{
    MCU_REQUIRE(p != NULL && a != NULL && b != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t out_dims[3] = {p->batch, p->m, p->n};
    MCU_REQUIRE(mcu_checked_count(out_dims, 3, 1) > 0 && p->k > 0 && p->k <= 32768 && p->a_batch_stride >= 0 &&
                    p->b_batch_stride >= 0,
                MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_input_offset_valid(p->a_offset) && mcu_input_offset_valid(p->b_offset) &&
                    mcu_output_offset_valid(p->output_offset) && mcu_act_s8_valid(p->act_min, p->act_max) &&
                    mcu_quant_valid(p->multiplier, p->shift),
                MCU_ERR_INVALID_ARG);
    const size_t out_bytes = (size_t)p->batch * (size_t)p->m * (size_t)p->n;
    const size_t a_bytes = (size_t)(p->batch - 1) * (size_t)p->a_batch_stride + (size_t)p->m * (size_t)p->k;
    const size_t b_bytes = (size_t)(p->batch - 1) * (size_t)p->b_batch_stride + (size_t)p->k * (size_t)p->n;
    MCU_REQUIRE(!mcu_overlaps(a, a_bytes, output, out_bytes) && !mcu_overlaps(b, b_bytes, output, out_bytes),
                MCU_ERR_INVALID_ARG);
    for (int32_t bi = 0; bi < p->batch; ++bi) {
        const int8_t *ab = a + (size_t)bi * (size_t)p->a_batch_stride;
        const int8_t *bb = b + (size_t)bi * (size_t)p->b_batch_stride;
        int8_t *ob = output + (size_t)bi * (size_t)p->m * (size_t)p->n;
        for (int32_t i = 0; i < p->m; ++i) {
            for (int32_t j = 0; j < p->n; ++j) {
                int32_t acc = 0;
                for (int32_t t = 0; t < p->k; ++t) {
                    acc += ((int32_t)ab[(size_t)i * (size_t)p->k + (size_t)t] + p->a_offset) *
                           ((int32_t)bb[(size_t)t * (size_t)p->n + (size_t)j] + p->b_offset);
                }
                ob[(size_t)i * (size_t)p->n + (size_t)j] =
                    mcu_requantize_to_s8(acc, p->multiplier, p->shift, p->output_offset, p->act_min, p->act_max);
            }
        }
    }
    return MCU_OK;
}
