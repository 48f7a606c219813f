/* The final cell state c_n of a 16x8 LSTM layer (nn.LSTM's c_n read by the model) with mcu_lstm_s16's arithmetic,
 * from the layer's hidden states as mcu_lstm_s16 wrote them: each step's gates read the step's input and the
 * hidden state before it (the given `state` at the first step, else the previous output row), exactly the codes
 * mcu_lstm_s16 read, so the cell runs through the same values bit for bit; the output gate and the hidden state
 * are not computed again (three of the four gate rows' products). CMSIS-NN's arm_lstm_unidirectional_s16 keeps its cell in its context (cell_state) and
 * returns it the same way. */
#include "mcu/kernels_s16.h"

#include "lstm_s16.h"

/* c' = sat16(sat16(rq(f c, forget)) + rq(i g, input)) from the Q3.12 pre-activations of i, f and g */
static inline int32_t next_cell(int32_t gi, int32_t gf, int32_t gg, int32_t c, const mcu_rnn16_rq *forget,
                                const mcu_rnn16_rq *input)
{
    const int32_t i = mcu_rnn16_sigmoid(gi);
    const int32_t f = mcu_rnn16_sigmoid(gf);
    const int32_t g = mcu_rnn16_tanh(gg * 3);
    const int32_t kept = mcu_rnn16_sat(mcu_rnn16_rq_apply(forget, f * c));
    return mcu_rnn16_sat(kept + mcu_rnn16_rq_apply(input, i * g));
}

int32_t mcu_lstm_final_cell_s16_get_buffer_size(const mcu_lstm_s16_params *p)
{
    if (p == NULL || p->hidden <= 0 || p->hidden > MCU_LSTM_S16_MAX_FEATURES || p->input_size <= 0 ||
        p->input_size > MCU_LSTM_S16_MAX_FEATURES) {
        return 0;
    }
    return 2 * (p->hidden + p->input_size);
}

mcu_status mcu_lstm_final_cell_s16(const mcu_context *ctx, const mcu_lstm_s16_params *p, const int16_t *input,
                                   const int16_t *hidden_states, const int16_t *state, const int16_t *cell0,
                                   const int8_t *w_ih, const int8_t *w_hh, const int64_t *bias, const int32_t *quant,
                                   int16_t *cell_out)
{
    MCU_REQUIRE(hidden_states != NULL, MCU_ERR_NULL_POINTER);
    MCU_CHECK(mcu_lstm16_check(ctx, p, input, hidden_states, state, cell0, w_ih, w_hh, bias, quant, cell_out,
                               mcu_lstm_final_cell_s16_get_buffer_size(p)));
    const int32_t hidden = p->hidden;
    int16_t *col_x = (int16_t *)ctx->buf;
    int16_t *col_h = col_x + p->input_size;
    mcu_rnn16_rq to_cell_f, to_cell_i;
    mcu_rnn16_rq_init(&to_cell_f, p->forget_mult, p->forget_shift);
    mcu_rnn16_rq_init(&to_cell_i, p->input_mult, p->input_shift);
    for (int32_t b = 0; b < p->batch; ++b) {
        int16_t *cell = cell_out + (size_t)b * (size_t)hidden;
        mcu_lstm16_first_cell(cell, cell0, b, hidden);
        const int16_t *h = state != NULL ? state + (size_t)b * (size_t)hidden : NULL;
        for (int32_t t = 0; t < p->steps; ++t) {
            const size_t step = (size_t)b * (size_t)p->steps + (size_t)t;
            const int16_t *x = input + step * (size_t)p->input_size;
            mcu_rnn16_lanes(x, p->input_size, col_x);
            if (h != NULL) {
                mcu_rnn16_lanes(h, hidden, col_h);
            }
            /* two units at a time: their i and f rows, then both g rows, three row pairs where the layer takes four
             * (the output gate is not needed) */
            int32_t j = 0;
            for (; j + 1 < hidden; j += 2) {
                int32_t gi0, gf0, gi1, gf1, gg0, gg1;
                mcu_lstm16_gate2(p, j, hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gi0, &gf0);
                mcu_lstm16_gate2(p, j + 1, hidden + j + 1, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gi1, &gf1);
                mcu_lstm16_gate2(p, 2 * hidden + j, 2 * hidden + j + 1, x, col_x, h, col_h, w_ih, w_hh, bias, quant,
                                 &gg0, &gg1);
                cell[j] = (int16_t)next_cell(gi0, gf0, gg0, cell[j], &to_cell_f, &to_cell_i);
                cell[j + 1] = (int16_t)next_cell(gi1, gf1, gg1, cell[j + 1], &to_cell_f, &to_cell_i);
            }
            if (j < hidden) { /* an odd last unit: its g row paired with its o row, whose value is not needed */
                int32_t gi, gf, gg, go;
                mcu_lstm16_gate2(p, j, hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gi, &gf);
                mcu_lstm16_gate2(p, 2 * hidden + j, 3 * hidden + j, x, col_x, h, col_h, w_ih, w_hh, bias, quant, &gg,
                                 &go);
                cell[j] = (int16_t)next_cell(gi, gf, gg, cell[j], &to_cell_f, &to_cell_i);
            }
            h = hidden_states + step * (size_t)hidden;
        }
    }
    return MCU_OK;
}
