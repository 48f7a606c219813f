/* The final cell state c_n of an int8 LSTM layer (nn.LSTM's c_n read by the model) with mcu_lstm_s8's arithmetic
 * (TFLite Micro's integer LSTM; TFLite keeps the cell as a variable tensor, CMSIS-NN's arm_lstm_unidirectional_s8
 * in its context), from the layer's hidden states as mcu_lstm_s8 wrote them: each step's i, f and g rows read the
 * step's input and the hidden state before it (hidden_zp at the first step, else the previous output row), the
 * codes mcu_lstm_s8 read, so the cell runs through the same values bit for bit; the output gate's rows and the
 * hidden state are not computed again. The cell is written as int16 at 2^-state_shift, its own scale. */
#include <string.h>

#include "mcu/kernels_s8.h"

#include "recurrent_s8.h"

mcu_status mcu_lstm_final_cell_s8(const mcu_context *ctx, const mcu_recurrent_s8_params *p, const int8_t *input,
                                  const int8_t *w_ih, const int8_t *w_hh, const int32_t *rows, const int16_t *table,
                                  const int8_t *hidden_states, int16_t *cell_out)
{
    MCU_REQUIRE(p != NULL && cell_out != NULL, MCU_ERR_NULL_POINTER);
    const int32_t scratch = mcu_recurrent_scratch(p, 5); /* mcu_lstm_s8_get_buffer_size */
    /* (the hidden states in the output's place: apart from the input and the scratch, as mcu_lstm_s8 wrote them) */
    MCU_CHECK(mcu_recurrent_check(ctx, p, input, w_ih, w_hh, rows, table, hidden_states, 4, scratch));
    const int32_t hidden = p->hidden;
    const size_t cell_bytes = (size_t)p->batch * (size_t)hidden * sizeof(int16_t);
    const size_t seq = (size_t)p->batch * (size_t)p->steps;
    MCU_REQUIRE(((uintptr_t)cell_out & 1u) == 0 &&
                    !mcu_overlaps(cell_out, cell_bytes, input, seq * (size_t)p->input_size) &&
                    !mcu_overlaps(cell_out, cell_bytes, hidden_states, seq * (size_t)hidden) &&
                    !mcu_overlaps(cell_out, cell_bytes, ctx->buf, (size_t)scratch) &&
                    !mcu_overlaps(cell_out, cell_bytes, rows, (size_t)(24 * hidden) * sizeof(int32_t)) &&
                    !mcu_overlaps(cell_out, cell_bytes, table, MCU_RECURRENT_S8_TABLE_SIZE * sizeof(int16_t)),
                MCU_ERR_INVALID_ARG);
    int16_t *gates = (int16_t *)ctx->buf;
    int16_t *col_x = gates + 5 * hidden; /* (mcu_lstm_s8's layout; its cell row is cell_out here) */
    int16_t *col_h = col_x + p->input_size;
    int8_t *zero_state = (int8_t *)(col_h + hidden);
    memset(zero_state, p->hidden_zp, (size_t)hidden);
    const int32_t cs = p->state_shift;
    for (int32_t b = 0; b < p->batch; ++b) {
        int16_t *cell = cell_out + (size_t)b * (size_t)hidden;
        memset(cell, 0, (size_t)hidden * sizeof(int16_t));
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int8_t *x = input + step * (size_t)p->input_size;
            const int8_t *h = t == 0 ? zero_state : hidden_states + (step - 1) * (size_t)hidden;
            mcu_recurrent_widen(x, p->input_size, col_x);
            mcu_recurrent_widen(h, hidden, col_h);
            /* the i, f and g rows */
            mcu_recurrent_sum_rows(p, 3 * hidden, w_ih, w_hh, rows, x, col_x, h, col_h, gates);
            for (int32_t j = 0; j < hidden; ++j) {
                const int32_t i = mcu_sigmoid_s16(table, gates[j]);
                const int32_t f = mcu_sigmoid_s16(table, gates[hidden + j]);
                const int32_t g = mcu_tanh_s16(table, gates[2 * hidden + j]);
                cell[j] = (int16_t)mcu_sat_s16(mcu_round_shift(f * cell[j], 15) + mcu_round_shift(i * g, 30 - cs));
            }
        }
    }
    return MCU_OK;
}
