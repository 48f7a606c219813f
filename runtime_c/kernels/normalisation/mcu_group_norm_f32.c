/* Group normalisation: each (batch, group) block of channels/groups channels by `spatial` positions is
 * normalised by its own mean and biased variance, then scaled and shifted per channel. Instance norm
 * is the case groups == channels. Two passes for the statistics (mean, then squared differences), as
 * mcu_layer_norm_f32; the layout flag lets channels-last activations (after a convolution) stay so. */
#include <math.h>
#include <stddef.h>

#include "mcu/kernels_f32.h"

#include "../common/check.h"

static size_t index_of(const mcu_group_norm_f32_params *p, int32_t n, int32_t c, int32_t s)
{
    const size_t base = (size_t)n * (size_t)p->channels * (size_t)p->spatial;
    return p->channels_last ? base + (size_t)s * (size_t)p->channels + (size_t)c
                            : base + (size_t)c * (size_t)p->spatial + (size_t)s;
}

mcu_status mcu_group_norm_f32(const mcu_group_norm_f32_params *p, const float *input, const float *weight,
                              const float *bias, float *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {p->batch, p->channels, p->spatial};
    const int32_t total = mcu_checked_count(dims, 3, (int32_t)sizeof(float));
    MCU_REQUIRE(total > 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->groups > 0 && p->channels % p->groups == 0, MCU_ERR_SHAPE);
    MCU_REQUIRE(p->eps >= 0.0f && (p->channels_last == 0 || p->channels_last == 1), MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)total * sizeof(float);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    const int32_t per_group = p->channels / p->groups;
    const float inv_n = 1.0f / (float)(per_group * p->spatial);
    for (int32_t n = 0; n < p->batch; ++n) {
        for (int32_t g = 0; g < p->groups; ++g) {
            const int32_t c0 = g * per_group;
            /* Centred on the group's first value: values near it subtract exactly (Sterbenz), so a group of
             * nearly equal values keeps its small deviations instead of losing them to the mean's rounding. */
            const float shift = input[index_of(p, n, c0, 0)];
            float sum = 0.0f;
            for (int32_t c = c0; c < c0 + per_group; ++c) {
                for (int32_t s = 0; s < p->spatial; ++s) {
                    sum += input[index_of(p, n, c, s)] - shift;
                }
            }
            const float centre = sum * inv_n;
            float sq = 0.0f;
            for (int32_t c = c0; c < c0 + per_group; ++c) {
                for (int32_t s = 0; s < p->spatial; ++s) {
                    const float d = (input[index_of(p, n, c, s)] - shift) - centre;
                    sq += d * d;
                }
            }
            const float rstd = 1.0f / sqrtf(sq * inv_n + p->eps);
            for (int32_t c = c0; c < c0 + per_group; ++c) {
                const float w = weight != NULL ? weight[c] : 1.0f;
                const float b = bias != NULL ? bias[c] : 0.0f;
                for (int32_t s = 0; s < p->spatial; ++s) {
                    const size_t i = index_of(p, n, c, s);
                    output[i] = ((input[i] - shift) - centre) * rstd * w + b;
                }
            }
        }
    }
    return MCU_OK;
}
