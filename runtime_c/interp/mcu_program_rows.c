/* A streamed prefix (MCU_K_ROWS) replayed from its table: the same walk checks it at load and runs it,
 * so the loader has checked every step execution takes. It follows the generated C of the prefix
 * (mcu/emit/prefix.py) step by step: each op makes its next rows in order, into a ring that first moves
 * the rows its consumers still read to its start when the new rows would not fit. */
#include <string.h>

#include "mcu/trace.h"
#include "mcu_program_internal.h"

/* Words per entry of each part of the table, in the order the parts follow one another (steps first). */
enum { STEP_WORDS = 2, OP_WORDS = 2, RING_WORDS = 5, CONSUMER_WORDS = 3, BODY_WORDS = 6, DESC_WORDS = 5 };
/* Rows, strides, paddings and row offsets stay far below this: products of two fit in 64 bits easily. */
#define ROWS_LIMIT (1 << 24)

#ifdef MCU_TRACE
/* A profiling build traces each step as event `instruction | (op + 1) << 16`, after one empty event
 * (op 0xFFFF) that measures the hooks themselves (mcu/plan/prefix.py's TRACE_SHIFT, TRACE_HOOKS). */
#define ROWS_EVENT(v, op) (((v)->trace - 1u) | ((uint32_t)(op) + 1u) << 16)
#define ROWS_TRACE_BEGIN(v, op) const uint32_t rows_t0 = (v)->trace != 0u ? mcu_trace_op_begin(ROWS_EVENT(v, op)) : 0u
#define ROWS_TRACE_END(v, op)                                                                                      \
    do {                                                                                                           \
        if ((v)->trace != 0u) {                                                                                    \
            mcu_trace_op_end(ROWS_EVENT(v, op), rows_t0);                                                          \
        }                                                                                                          \
    } while (0)
#else
#define ROWS_TRACE_BEGIN(v, op) ((void)0)
#define ROWS_TRACE_END(v, op) ((void)0)
#endif

mcu_status mcu_rows_table_init(mcu_rows_table *t, const uint8_t *data, uint32_t words, const int32_t *params,
                               uint32_t n_params, uint32_t rings_bytes)
{
    MCU_REQUIRE(n_params == MCU_ROWS_N_PARAMS && data != NULL && (uintptr_t)data % 4u == 0, MCU_ERR_PROGRAM_INVALID);
    for (uint32_t i = 0; i < MCU_ROWS_N_PARAMS; ++i) {
        MCU_REQUIRE(params[i] >= 0 && params[i] < ROWS_LIMIT, MCU_ERR_PROGRAM_INVALID);
        t->n[i] = (uint32_t)params[i];
    }
    MCU_REQUIRE(t->n[MCU_ROWS_OPS] >= 1 && t->n[MCU_ROWS_OPS] < MCU_PROGRAM_MAX_ROWS_OPS &&
                    t->n[MCU_ROWS_RINGS] <= MCU_PROGRAM_MAX_ROWS_OPS && t->n[MCU_ROWS_BODY] >= 1,
                MCU_ERR_PROGRAM_INVALID);
    const uint64_t need = (uint64_t)STEP_WORDS * t->n[MCU_ROWS_STEPS] + (uint64_t)OP_WORDS * (t->n[MCU_ROWS_OPS] + 1u) +
                          (uint64_t)RING_WORDS * t->n[MCU_ROWS_RINGS] +
                          (uint64_t)CONSUMER_WORDS * t->n[MCU_ROWS_CONSUMERS] +
                          (uint64_t)BODY_WORDS * t->n[MCU_ROWS_BODY] + (uint64_t)DESC_WORDS * t->n[MCU_ROWS_DESCS];
    MCU_REQUIRE(need == words, MCU_ERR_PROGRAM_INVALID);
    const int32_t *w = (const int32_t *)(const void *)data;
    t->steps = w;
    t->ops = t->steps + STEP_WORDS * t->n[MCU_ROWS_STEPS];
    t->rings = t->ops + OP_WORDS * (t->n[MCU_ROWS_OPS] + 1u);
    t->consumers = t->rings + RING_WORDS * t->n[MCU_ROWS_RINGS];
    t->body = t->consumers + CONSUMER_WORDS * t->n[MCU_ROWS_CONSUMERS];
    t->descs = t->body + BODY_WORDS * t->n[MCU_ROWS_BODY];
    t->rings_bytes = rings_bytes;
    return MCU_OK;
}

static int in_range(int32_t v, int32_t lo, int32_t hi)
{
    return v >= lo && v <= hi;
}

/* Every entry's fields in range, before the walk relies on them. */
static mcu_status check_parts(const mcu_rows_table *t)
{
    const uint32_t n_ops = t->n[MCU_ROWS_OPS];
    const int32_t n_rings = (int32_t)t->n[MCU_ROWS_RINGS];
    for (uint32_t i = 0; i <= n_ops; ++i) {
        const int32_t *o = t->ops + OP_WORDS * i;
        MCU_REQUIRE(in_range(o[0], 0, ROWS_LIMIT) && in_range(o[1], -1, n_rings - 1), MCU_ERR_PROGRAM_INVALID);
    }
    for (int32_t r = 0; r < n_rings; ++r) {
        const int32_t *g = t->rings + RING_WORDS * r;
        MCU_REQUIRE(g[0] >= 0 && g[1] >= 1 && in_range(g[2], 1, ROWS_LIMIT) && g[3] >= 0 && g[4] >= 0 &&
                        (uint64_t)g[3] + (uint64_t)g[4] <= t->n[MCU_ROWS_CONSUMERS] &&
                        (uint64_t)g[0] + (uint64_t)g[1] * (uint64_t)g[2] <= t->rings_bytes,
                    MCU_ERR_PROGRAM_INVALID);
    }
    for (uint32_t c = 0; c < t->n[MCU_ROWS_CONSUMERS]; ++c) {
        const int32_t *k = t->consumers + CONSUMER_WORDS * c;
        MCU_REQUIRE(in_range(k[0], 0, (int32_t)n_ops - 1) && in_range(k[1], 1, ROWS_LIMIT) &&
                        in_range(k[2], 0, ROWS_LIMIT),
                    MCU_ERR_PROGRAM_INVALID);
    }
    for (uint32_t b = 0; b < t->n[MCU_ROWS_BODY]; ++b) {
        const int32_t *e = t->body + BODY_WORDS * b;
        MCU_REQUIRE(in_range(e[0], 0, (int32_t)n_ops - 1) && in_range(e[1], 0, ROWS_LIMIT) && e[2] >= e[1] &&
                        in_range(e[2], 0, ROWS_LIMIT) && in_range(e[3], 1, ROWS_LIMIT) && e[4] >= 0 && e[5] >= 0 &&
                        (uint64_t)e[4] + (uint64_t)e[5] <= t->n[MCU_ROWS_DESCS],
                    MCU_ERR_PROGRAM_INVALID);
    }
    for (uint32_t d = 0; d < t->n[MCU_ROWS_DESCS]; ++d) {
        const int32_t *e = t->descs + DESC_WORDS * d;
        MCU_REQUIRE(in_range(e[0], 0, MCU_PROGRAM_MAX_OPERANDS - 1) && in_range(e[1], -1, n_rings - 1) &&
                        in_range(e[2], 0, ROWS_LIMIT) && in_range(e[3], -ROWS_LIMIT, ROWS_LIMIT) && e[4] >= 1,
                    MCU_ERR_PROGRAM_INVALID);
    }
    return MCU_OK;
}

/* Make room in ring `r` for rows [y, y + rows): when they would not fit after its first kept row, the
 * rows from the lowest one a consumer still reads move to the ring's start. */
static mcu_status make_room(const mcu_rows_table *t, mcu_rows_visitor *v, const int32_t *next, int32_t *base,
                            int32_t r, int32_t y, int32_t rows)
{
    const int32_t *g = t->rings + RING_WORDS * r;
    /* The ring's rows start at or below y and it holds them all (a ring two ops would write fails here). */
    MCU_REQUIRE(y >= base[r] && y - base[r] <= g[2], MCU_ERR_PROGRAM_INVALID);
    if (y + rows - base[r] > g[2]) {
        int32_t low = y;
        for (int32_t c = g[3]; c < g[3] + g[4]; ++c) {
            const int32_t *k = t->consumers + CONSUMER_WORDS * c;
            if (next[k[0]] < t->ops[OP_WORDS * k[0]]) {
                const int64_t need = (int64_t)next[k[0]] * k[1] - k[2];
                low = need < 0 ? 0 : (need < low ? (int32_t)need : low);
            }
        }
        /* The rows kept are rows the ring holds, and the new rows then fit. */
        MCU_REQUIRE(low >= base[r] && y + rows - low <= g[2], MCU_ERR_PROGRAM_INVALID);
        MCU_CHECK(v->move(v, (uint32_t)g[0], (uint32_t)g[0] + (uint32_t)(low - base[r]) * (uint32_t)g[1],
                          (uint32_t)(y - low) * (uint32_t)g[1]));
        base[r] = low;
    }
    return MCU_OK;
}

mcu_status mcu_rows_walk(const mcu_rows_table *t, mcu_rows_visitor *v)
{
    MCU_CHECK(check_parts(t));
    const int32_t n_ops = (int32_t)t->n[MCU_ROWS_OPS];
    int32_t next[MCU_PROGRAM_MAX_ROWS_OPS];
    int32_t base[MCU_PROGRAM_MAX_ROWS_OPS];
    memset(next, 0, sizeof(next));
    memset(base, 0, sizeof(base));
    {
        ROWS_TRACE_BEGIN(v, 0xFFFE);
        ROWS_TRACE_END(v, 0xFFFE);
    }
    for (uint32_t i = 0; i < t->n[MCU_ROWS_STEPS]; ++i) {
        const int32_t op = t->steps[STEP_WORDS * i];
        ROWS_TRACE_BEGIN(v, op);
        const int32_t rows = t->steps[STEP_WORDS * i + 1];
        MCU_REQUIRE(in_range(op, 0, n_ops) && in_range(rows, 1, ROWS_LIMIT), MCU_ERR_PROGRAM_INVALID);
        const int32_t *o = t->ops + OP_WORDS * op;
        const int32_t y = next[op];
        MCU_REQUIRE(rows <= o[0] - y, MCU_ERR_PROGRAM_INVALID);
        next[op] = y + rows;
        const int32_t r = o[1];
        if (r >= 0) {
            MCU_CHECK(make_room(t, v, next, base, r, y, rows));
        }
        const int32_t *g = r >= 0 ? t->rings + RING_WORDS * r : NULL;
        if (op == n_ops) { /* the streamed input's rows, into its ring */
            MCU_REQUIRE(g != NULL, MCU_ERR_PROGRAM_INVALID);
            MCU_CHECK(v->read(v, y, rows, (uint32_t)g[0] + (uint32_t)(y - base[r]) * (uint32_t)g[1],
                              (uint32_t)rows * (uint32_t)g[1]));
            ROWS_TRACE_END(v, op);
            continue;
        }
        uint32_t b = 0;
        const int32_t *e = NULL;
        for (; b < t->n[MCU_ROWS_BODY]; ++b) {
            e = t->body + BODY_WORDS * b;
            if (e[0] == op && e[1] <= y && y <= e[2] && e[3] == rows) {
                break;
            }
        }
        MCU_REQUIRE(b < t->n[MCU_ROWS_BODY], MCU_ERR_PROGRAM_INVALID);
        int64_t moves[MCU_PROGRAM_MAX_OPERANDS];
        memset(moves, 0, sizeof(moves));
        for (int32_t d = e[4]; d < e[4] + e[5]; ++d) {
            const int32_t *s = t->descs + DESC_WORDS * d;
            const int64_t row = (int64_t)y * s[2] + s[3] - (s[1] >= 0 ? base[s[1]] : 0);
            MCU_REQUIRE(row >= 0 && moves[s[0]] == 0, MCU_ERR_PROGRAM_INVALID);
            moves[s[0]] = row * s[4];
        }
        MCU_CHECK(v->call(v, b, moves));
        ROWS_TRACE_END(v, op);
    }
    /* Every op has made all its rows (the streamed input's too, when the prefix reads one). */
    for (int32_t op = 0; op <= n_ops; ++op) {
        MCU_REQUIRE(next[op] == t->ops[OP_WORDS * op], MCU_ERR_PROGRAM_INVALID);
    }
    return MCU_OK;
}
