/* mcu_gru_s8 from a given hidden state instead of the zero state: an nn.GRUCell step (a sequence of one) or an
 * nn.GRU layer called with h0. The state is int8 at the output's scale and zero point, read once per batch item
 * into the scratch, so the arithmetic after that is mcu_gru_s8's bit for bit. */
#include "mcu/kernels_s8.h"

#include "recurrent_layers.h"

mcu_status mcu_gru_from_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                           const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                           const int8_t *state, int8_t *output)
{
    MCU_REQUIRE(p != NULL && ctx != NULL && state != NULL, MCU_ERR_NULL_POINTER);
    /* a later batch item's state must survive the earlier items' outputs and the scratch */
    const size_t state_bytes = (size_t)(p->batch < 0 ? 0 : p->batch) * (size_t)(p->hidden < 0 ? 0 : p->hidden);
    const size_t out_bytes = state_bytes * (size_t)(p->steps < 0 ? 0 : p->steps);
    MCU_REQUIRE(!mcu_overlaps(state, state_bytes, output, out_bytes) &&
                    !mcu_overlaps(state, state_bytes, ctx->buf, (size_t)mcu_recurrent_scratch(p, 4)),
                MCU_ERR_INVALID_ARG);
    return mcu_gru_run(0, ctx, p, input, w_ih, w_hh, rows, table, state, output);
}
