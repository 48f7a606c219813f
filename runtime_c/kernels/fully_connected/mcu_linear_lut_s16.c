#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/lut.h"

/* The whole weight matrix decoded to int8 ([out][in]) for mcu_linear_s16. */
int32_t mcu_linear_lut_s16_get_buffer_size(const mcu_linear_s16_params *p)
{
    if (p == NULL) {
        return 0;
    }
    const int32_t dims[2] = {p->out_features, p->in_features};
    const int32_t count = mcu_checked_count(dims, 2, 1);
    return count > 0 ? count : 0;
}

mcu_status mcu_linear_lut_s16(const mcu_context *ctx, const mcu_linear_s16_params *p,
    const mcu_per_channel_quant *q, int32_t word, const int16_t *input, const uint8_t *indices, const int8_t *table,
    const int64_t *bias, int16_t *output)
{
    MCU_REQUIRE(ctx != NULL && ctx->buf != NULL && p != NULL && input != NULL && indices != NULL && table != NULL &&
                    output != NULL,
                MCU_ERR_NULL_POINTER);
    const int32_t in_dims[2] = {p->batch, p->in_features}, out_dims[2] = {p->batch, p->out_features};
    const int32_t in_bytes = mcu_checked_count(in_dims, 2, 2), out_bytes = mcu_checked_count(out_dims, 2, 2);
    const int32_t count = mcu_linear_lut_s16_get_buffer_size(p);
    const mcu_status status = mcu_lut_decode_s16(ctx, word, p->out_features, count, indices, table, 0, input,
                                                 in_bytes, output, out_bytes);
    if (status != MCU_OK) {
        return status;
    }
    int8_t *w = (int8_t *)ctx->buf;
    /* the 16x8 kernel checks the rest (given no scratch: the decoded weights hold it) */
    return mcu_linear_s16(NULL, p, q, input, w, bias, output);
}
