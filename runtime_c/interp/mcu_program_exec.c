/* Running a verified program: method and tensor queries, execution, bundled vectors. */
#include <string.h>

#include "mcu/trace.h"
#include "mcu_program_internal.h"

mcu_status mcu_program_method(const mcu_program *p, uint32_t method, mcu_program_method_info *info)
{
    MCU_REQUIRE(p != NULL && info != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_fbt root, m;
    mcu_program_reader(p, &f, &root);
    MCU_REQUIRE(mcu_program_method_table(&f, p, method, &m) != 0, MCU_ERR_NOT_FOUND);
    memset(info, 0, sizeof(*info));
    info->name = mcu_fb_string(&f, &m, MCU_METHOD_NAME);
    mcu_fb_vector(&f, &m, MCU_METHOD_INPUTS, 4, &info->n_inputs);
    mcu_fb_vector(&f, &m, MCU_METHOD_OUTPUTS, 4, &info->n_outputs);
    mcu_fb_vector(&f, &m, MCU_METHOD_INSTRUCTIONS, 4, &info->n_instructions);
    mcu_fb_vector(&f, &m, MCU_METHOD_BUNDLED, 4, &info->n_bundled);
    uint32_t n;
    mcu_fb_vector(&f, &m, MCU_METHOD_ARENA_SIZES, 4, &n);
    MCU_REQUIRE(n <= MCU_PROGRAM_MAX_ARENAS, MCU_ERR_PROGRAM_INVALID);
    info->n_arenas = n;
    for (uint32_t i = 0; i < n; ++i) {
        info->arena_sizes[i] = mcu_fb_u32_at(&f, &m, MCU_METHOD_ARENA_SIZES, i);
    }
    return f.bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

mcu_status mcu_program_find_method(const mcu_program *p, const char *name, uint32_t *method)
{
    MCU_REQUIRE(p != NULL && name != NULL && method != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_fbt root, m;
    mcu_program_reader(p, &f, &root);
    for (uint32_t i = 0; i < p->n_methods; ++i) {
        mcu_program_method_table(&f, p, i, &m);
        if (mcu_program_streq(mcu_fb_string(&f, &m, MCU_METHOD_NAME), name)) {
            *method = i;
            return MCU_OK;
        }
    }
    return MCU_ERR_NOT_FOUND;
}

mcu_status mcu_program_io(const mcu_program *p, uint32_t method, uint32_t output, uint32_t index,
                          mcu_program_tensor_info *info)
{
    MCU_REQUIRE(p != NULL && info != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_fbt root, m, t, quant;
    mcu_program_reader(p, &f, &root);
    MCU_REQUIRE(mcu_program_method_table(&f, p, method, &m) != 0, MCU_ERR_NOT_FOUND);
    const uint32_t id = mcu_fb_u32_at(&f, &m, output ? MCU_METHOD_OUTPUTS : MCU_METHOD_INPUTS, index);
    MCU_REQUIRE(id != MCU_FB_ABSENT_INDEX, MCU_ERR_NOT_FOUND);
    mcu_program_tensor_desc d;
    mcu_program_tensor(&f, &m, id, &t, &d);
    memset(info, 0, sizeof(*info));
    info->name = mcu_fb_string(&f, &t, MCU_TENSOR_NAME);
    info->streamed = d.placement == MCU_PLACEMENT_STREAMED;
    info->dtype = d.dtype;
    info->arena = d.index;
    info->offset = d.offset;
    info->nbytes = d.nbytes;
    uint32_t n_order, n_scale;
    const uint32_t shape = mcu_fb_vector(&f, &t, MCU_TENSOR_SHAPE, 4, &info->rank);
    const uint32_t order = mcu_fb_vector(&f, &t, MCU_TENSOR_DIM_ORDER, 1, &n_order);
    MCU_REQUIRE(!f.bad && info->rank <= MCU_PROGRAM_MAX_RANK && n_order == info->rank, MCU_ERR_PROGRAM_INVALID);
    memcpy(info->shape, f.b + shape, info->rank * sizeof(int32_t));
    memcpy(info->dim_order, f.b + order, info->rank);
    mcu_fb_child(&f, &t, MCU_TENSOR_QUANT, &quant);
    const uint32_t scale = mcu_fb_vector(&f, &quant, MCU_QUANT_SCALE, 4, &n_scale);
    const uint32_t zp = mcu_fb_vector(&f, &quant, MCU_QUANT_ZERO_POINT, 4, &n_scale);
    if (n_scale == 1 && !f.bad) {
        info->quantized = 1;
        memcpy(&info->scale, f.b + scale, 4);
        memcpy(&info->zero_point, f.b + zp, 4);
    }
    return f.bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

/* What execution looks up for every operand: the method's tensors and the program's segments. */
typedef struct {
    mcu_fb f;
    const mcu_program *p;
    uint32_t tensors, n_tensors;
    uint32_t segments, n_segments;
    mcu_program_input_rows_fn input_rows; /* the streamed input's reader (NULL: none given) */
    void *context;
} mcu_exec_ctx;

/* Pointer to operand `id` (NULL for -1), its size and dtype. Inlined into every caller: a call for each
 * operand of each instruction would cost every kernel call instructions. */
__attribute__((always_inline)) static inline void *operand(mcu_exec_ctx *x, int32_t id, uint8_t *const *arenas, uint32_t *nbytes, uint32_t *dtype)
{
    *nbytes = 0;
    if (id < 0) {
        return NULL;
    }
    mcu_fbt t;
    mcu_program_tensor_desc d;
    mcu_fb_elem(&x->f, x->tensors, x->n_tensors, (uint32_t)id, &t);
    mcu_program_tensor_fields(&x->f, &t, &d);
    *nbytes = d.nbytes;
    *dtype = d.dtype;
    if (d.placement == MCU_PLACEMENT_ARENA) {
        return d.index < MCU_PROGRAM_MAX_ARENAS && arenas[d.index] != NULL ? arenas[d.index] + d.offset : NULL;
    }
    const uint8_t *data;
    uint32_t size;
    if (mcu_program_segment_in(&x->f, x->p, x->segments, x->n_segments, d.index, &data, &size) != MCU_OK) {
        return NULL;
    }
    /* Constants are only ever read: the verifier keeps them out of every output operand. */
    return (void *)(uintptr_t)(data + d.offset);
}

static mcu_status run_delegate(mcu_fb *f, const mcu_program *p, void *const *ops, const uint32_t *sizes,
                               uint32_t n_ops, const int32_t *params)
{
    mcu_fbt root, d;
    mcu_fb_table(f, p->root, &root);
    mcu_fb_table_at(f, &root, MCU_PROGRAM_DELEGATES, (uint32_t)params[0], &d);
    const mcu_delegate_backend *b = mcu_delegate_find(p->delegates, p->n_delegates,
                                                      mcu_fb_string(f, &d, MCU_DELEGATE_BACKEND));
    MCU_REQUIRE(b != NULL && p->delegate_handles != NULL, MCU_ERR_UNSUPPORTED);
    const uint32_t n_outputs = (uint32_t)params[1];
    return mcu_delegate_execute(b, p->delegate_handles[params[0]], ops, sizes, n_ops - n_outputs, n_outputs);
}

/* Instruction `insn` (kernel id `kernel`), at iteration `it` of a loop of `count` iterations (count 0: in no
 * loop). A body instruction runs only at its own iterations, its operands moved by their strides. `moves`
 * (a streamed prefix's row call, or NULL): bytes each operand moves from its place. */
static mcu_status run_instruction(mcu_exec_ctx *x, const mcu_fbt *insn, uint32_t kernel, uint8_t *const *bases,
                                  uint32_t it, uint32_t count, const int64_t *moves)
{
    mcu_fb *const fp = &x->f;
    uint32_t n_ops, n_params;
    const uint32_t ov = mcu_fb_vector(fp, insn, MCU_INSN_OPERANDS, 4, &n_ops);
    MCU_REQUIRE(!fp->bad && n_ops >= 1 && n_ops <= MCU_PROGRAM_MAX_OPERANDS, MCU_ERR_PROGRAM_INVALID);
    /* In a loop: where the instruction runs and how its operands move (the loader has proved that an
     * instruction outside every loop has neither, so that path reads nothing more). */
    mcu_program_step step;
    const int32_t *strides = NULL;
    uint32_t pass = 0;
    if (count != 0) {
        mcu_program_step_fields(fp, insn, n_ops, count, &step);
        MCU_REQUIRE(!fp->bad, MCU_ERR_PROGRAM_INVALID);
        if (it < step.first || it >= step.end) {
            return MCU_OK; /* another pass's instruction */
        }
        strides = step.strides;
        pass = it - step.first;
    }
    const uint32_t pv = mcu_fb_vector(fp, insn, MCU_INSN_PARAMS, 4, &n_params);
    MCU_REQUIRE(!fp->bad && n_params <= MCU_PROGRAM_MAX_PARAMS, MCU_ERR_PROGRAM_INVALID);
    void *ops[MCU_PROGRAM_MAX_OPERANDS];
    uint32_t sizes[MCU_PROGRAM_MAX_OPERANDS];
    uint32_t dtypes[MCU_PROGRAM_MAX_OPERANDS];
    int32_t ids[MCU_PROGRAM_MAX_OPERANDS];
    int32_t params[MCU_PROGRAM_MAX_PARAMS];
    memcpy(ids, fp->b + ov, n_ops * sizeof(int32_t));
    memcpy(params, fp->b + pv, n_params * sizeof(int32_t));
    for (uint32_t k = 0; k < n_ops; ++k) {
        dtypes[k] = 0;
        ops[k] = operand(x, ids[k], bases, &sizes[k], &dtypes[k]);
        if (strides != NULL && ops[k] != NULL && strides[k] != 0) { /* the loader proved every pass's place */
            ops[k] = (uint8_t *)ops[k] + (ptrdiff_t)strides[k] * (ptrdiff_t)pass;
        }
    }
    if (moves != NULL) { /* a streamed prefix's row call: the loader proved each one's places too */
        for (uint32_t k = 0; k < n_ops; ++k) {
            ops[k] = ops[k] != NULL ? (uint8_t *)ops[k] + (ptrdiff_t)moves[k] : NULL;
        }
    }
    MCU_REQUIRE(!fp->bad, MCU_ERR_PROGRAM_INVALID);
    if (kernel == MCU_K_FILL) {
        MCU_REQUIRE(ops[0] != NULL && n_params == 1, MCU_ERR_PROGRAM_INVALID);
        memset(ops[0], params[0] & 0xFF, sizes[0]);
        return MCU_OK;
    }
    if (kernel == MCU_K_MOVE) {
        MCU_REQUIRE(n_ops == 2 && ops[0] != NULL && ops[1] != NULL && sizes[0] == sizes[1], MCU_ERR_PROGRAM_INVALID);
        memmove(ops[1], ops[0], sizes[1]);
        return MCU_OK;
    }
    if (kernel == MCU_K_DELEGATE) {
        return run_delegate(fp, x->p, ops, sizes, n_ops, params);
    }
    return mcu_program_dispatch(kernel, ops, sizes, n_ops, params, n_params, (int32_t)mcu_dtype_size(dtypes[0]));
}

/* A streamed prefix run by the walk of mcu_program_rows.c: its rings, the body's row calls, the reader. */
typedef struct {
    mcu_rows_visitor v;
    mcu_exec_ctx *x;
    uint8_t *const *bases;
    uint8_t *rings;
    uint32_t iv, n, first; /* the method's instructions and where the body starts */
} rows_run;

static mcu_status rows_move(mcu_rows_visitor *v, uint32_t to, uint32_t from, uint32_t bytes)
{
    rows_run *r = (rows_run *)(void *)v;
    memmove(r->rings + to, r->rings + from, bytes);
    return MCU_OK;
}

static mcu_status rows_read(mcu_rows_visitor *v, int32_t y, int32_t rows, uint32_t at, uint32_t bytes)
{
    rows_run *r = (rows_run *)(void *)v;
    (void)bytes;
    MCU_REQUIRE(r->x->input_rows != NULL, MCU_ERR_NULL_POINTER);
    return r->x->input_rows(r->x->context, y, rows, r->rings + at);
}

static mcu_status rows_call(mcu_rows_visitor *v, uint32_t body, const int64_t *moves)
{
    rows_run *r = (rows_run *)(void *)v;
    mcu_fbt insn;
    mcu_fb_elem(&r->x->f, r->iv, r->n, r->first + body, &insn);
    const uint32_t kernel = mcu_fb_scalar(&r->x->f, &insn, MCU_INSN_KERNEL, 2, 0);
    return run_instruction(r->x, &insn, kernel, r->bases, 0, 0, moves);
}

/* The MCU_K_ROWS instruction `insn` at index `i` of the method's `n` instructions (vector `iv`). Its third
 * operand, a streamed input, is in no memory and never resolved: its rows come from x->input_rows. Out of
 * line: inlined into the instruction loop, its frame would cost every kernel call a few instructions. */
MCU_PROGRAM_SHARED static mcu_status run_rows(mcu_exec_ctx *x, const mcu_fbt *insn, uint32_t iv, uint32_t n,
                                              uint32_t i, uint8_t *const *bases)
{
    mcu_fb *const fp = &x->f;
    uint32_t n_ops, n_params, tsize, rsize, dtype;
    const uint32_t ov = mcu_fb_vector(fp, insn, MCU_INSN_OPERANDS, 4, &n_ops);
    const uint32_t pv = mcu_fb_vector(fp, insn, MCU_INSN_PARAMS, 4, &n_params);
    MCU_REQUIRE(!fp->bad && n_ops == 3 && n_params == MCU_ROWS_N_PARAMS, MCU_ERR_PROGRAM_INVALID);
    int32_t params[MCU_ROWS_N_PARAMS];
    memcpy(params, fp->b + pv, sizeof(params));
    const uint8_t *table = (const uint8_t *)operand(x, (int32_t)mcu_fb_u32(fp, ov), bases, &tsize, &dtype);
    rows_run r = {{.move = rows_move, .read = rows_read, .call = rows_call}, x, bases, NULL, iv, n, i + 1u};
#ifdef MCU_TRACE
    r.v.trace = i + 1u;
#endif
    r.rings = (uint8_t *)operand(x, (int32_t)mcu_fb_u32(fp, ov + 4u), bases, &rsize, &dtype);
    mcu_rows_table t;
    MCU_CHECK(mcu_rows_table_init(&t, table, tsize / 4u, params, n_params, r.rings != NULL ? rsize : 0u));
    MCU_REQUIRE(!fp->bad && (uint32_t)params[MCU_ROWS_BODY] < n - i, MCU_ERR_PROGRAM_INVALID);
    return mcu_rows_walk(&t, &r.v);
}

static mcu_status execute(const mcu_program *p, uint32_t method, uint8_t *const *arenas, const uint32_t *arena_sizes,
                          uint32_t n_arenas, mcu_program_input_rows_fn input_rows, void *context)
{
    MCU_REQUIRE(p != NULL && (n_arenas == 0 || (arenas != NULL && arena_sizes != NULL)), MCU_ERR_NULL_POINTER);
    mcu_exec_ctx x;
    mcu_fb *const fp = &x.f;
    mcu_fbt root, m, insn;
    mcu_program_reader(p, fp, &root);
    MCU_REQUIRE(mcu_program_method_table(fp, p, method, &m) != 0, MCU_ERR_NOT_FOUND);
    x.p = p;
    x.input_rows = input_rows;
    x.context = context;
    x.tensors = mcu_fb_vector(fp, &m, MCU_METHOD_TENSORS, 4, &x.n_tensors);
    x.segments = mcu_fb_vector(fp, &root, MCU_PROGRAM_SEGMENTS, 4, &x.n_segments);
    uint32_t n;
    mcu_fb_vector(fp, &m, MCU_METHOD_ARENA_SIZES, 4, &n);
    MCU_REQUIRE(n <= n_arenas && n <= MCU_PROGRAM_MAX_ARENAS, MCU_ERR_BUFFER_TOO_SMALL);
    uint8_t *bases[MCU_PROGRAM_MAX_ARENAS] = {NULL};
    for (uint32_t i = 0; i < n; ++i) {
        MCU_REQUIRE(arenas[i] != NULL, MCU_ERR_NULL_POINTER);
        MCU_REQUIRE((uintptr_t)arenas[i] % MCU_PROGRAM_ALIGN == 0, MCU_ERR_INVALID_ARG);
        MCU_REQUIRE(arena_sizes[i] >= mcu_fb_u32_at(fp, &m, MCU_METHOD_ARENA_SIZES, i), MCU_ERR_BUFFER_TOO_SMALL);
        bases[i] = arenas[i];
    }
    const uint32_t iv = mcu_fb_vector(fp, &m, MCU_METHOD_INSTRUCTIONS, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        mcu_fb_elem(fp, iv, n, i, &insn);
        const uint32_t kernel = mcu_fb_scalar(fp, &insn, MCU_INSN_KERNEL, 2, 0);
        uint32_t count = 0, body = 0;
        if (kernel > MCU_K_DELEGATE) { /* the interpreter's own steps: a kernel call pays one test */
            if (kernel == MCU_K_ROWS) { /* its walk traces each step (mcu_program_rows.c) */
                MCU_CHECK(run_rows(&x, &insn, iv, n, i, bases));
                uint32_t n_params;
                i += mcu_fb_u32(fp, mcu_fb_vector(fp, &insn, MCU_INSN_PARAMS, 4, &n_params) + 4u * MCU_ROWS_BODY);
                continue;
            }
            if (kernel == MCU_K_LOOP) {
                uint32_t n_params;
                const uint32_t pv = mcu_fb_vector(fp, &insn, MCU_INSN_PARAMS, 4, &n_params);
                MCU_REQUIRE(!fp->bad && n_params == 2, MCU_ERR_PROGRAM_INVALID);
                count = mcu_fb_u32(fp, pv);
                body = mcu_fb_u32(fp, pv + 4u);
                MCU_REQUIRE(!fp->bad && count >= 1 && body >= 1 && body < n - i, MCU_ERR_PROGRAM_INVALID);
            }
        }
        /* The event id is the instruction's index in its method: the host names the op from the
         * instruction's name (mcu/devtools/program_trace.py); a loop is one event. Without MCU_TRACE both
         * hooks vanish. */
        MCU_TRACE_OP_BEGIN(i);
        if (body == 0) {
            MCU_CHECK(run_instruction(&x, &insn, kernel, bases, 0, 0, NULL));
        } else {
            for (uint32_t it = 0; it < count; ++it) {
                for (uint32_t j = 1; j <= body; ++j) {
                    mcu_fbt step;
                    mcu_fb_elem(fp, iv, n, i + j, &step);
                    MCU_CHECK(run_instruction(&x, &step, mcu_fb_scalar(fp, &step, MCU_INSN_KERNEL, 2, 0), bases, it,
                                              count, NULL));
                }
            }
            i += body;
        }
        MCU_TRACE_OP_END(i - body);
    }
    return fp->bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

mcu_status mcu_program_execute(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                               const uint32_t *arena_sizes, uint32_t n_arenas)
{
    return execute(p, method, arenas, arena_sizes, n_arenas, NULL, NULL);
}

mcu_status mcu_program_execute_streamed(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                                        const uint32_t *arena_sizes, uint32_t n_arenas,
                                        mcu_program_input_rows_fn input_rows, void *context)
{
    return execute(p, method, arenas, arena_sizes, n_arenas, input_rows, context);
}

/* mcu_program_run's reader of a streamed input: its rows from the caller's whole input. */
typedef struct {
    const uint8_t *data;
    uint32_t row_bytes, rows;
} whole_input;

static mcu_status read_whole(void *context, int32_t first_row, int32_t rows, void *rows_out)
{
    const whole_input *w = (const whole_input *)context;
    MCU_REQUIRE(first_row >= 0 && rows >= 0 && (uint32_t)first_row + (uint32_t)rows <= w->rows, MCU_ERR_INVALID_ARG);
    memcpy(rows_out, w->data + (size_t)first_row * w->row_bytes, (size_t)rows * w->row_bytes);
    return MCU_OK;
}

/* Inputs in, execute, outputs out. A streamed input goes through `input_rows`; with none given and `whole`
 * non-NULL, through read_whole from its entry of `inputs`. */
static mcu_status run_io(const mcu_program *p, uint32_t method, uint8_t *const *arenas, const uint32_t *arena_sizes,
                         uint32_t n_arenas, const void *const *inputs, void *const *outputs,
                         mcu_program_input_rows_fn input_rows, void *context, whole_input *whole)
{
    mcu_program_method_info mi;
    MCU_CHECK(mcu_program_method(p, method, &mi));
    MCU_REQUIRE((outputs != NULL || mi.n_outputs == 0) &&
                    (n_arenas == 0 || (arenas != NULL && arena_sizes != NULL)),
                MCU_ERR_NULL_POINTER);
    for (uint32_t pass = 0; pass < 2; ++pass) {
        const uint32_t count = pass ? mi.n_outputs : mi.n_inputs;
        for (uint32_t i = 0; i < count; ++i) {
            mcu_program_tensor_info t;
            MCU_CHECK(mcu_program_io(p, method, pass, i, &t));
            const void *src = pass == 0 && inputs != NULL ? inputs[i] : NULL;
            if (t.streamed) {
                if (input_rows == NULL && whole != NULL) { /* the loader proved rank 4, whole rows */
                    MCU_REQUIRE(src != NULL, MCU_ERR_NULL_POINTER);
                    whole->data = (const uint8_t *)src;
                    whole->rows = (uint32_t)t.shape[2];
                    whole->row_bytes = t.nbytes / whole->rows;
                    input_rows = read_whole;
                    context = whole;
                }
                continue; /* read by rows through input_rows */
            }
            MCU_REQUIRE(t.arena < n_arenas && arenas[t.arena] != NULL &&
                            t.offset <= arena_sizes[t.arena] && t.nbytes <= arena_sizes[t.arena] - t.offset,
                        MCU_ERR_BUFFER_TOO_SMALL);
            uint8_t *at = arenas[t.arena] + t.offset;
            src = pass ? at : src;
            void *dst = pass ? outputs[i] : at;
            MCU_REQUIRE(src != NULL && dst != NULL, MCU_ERR_NULL_POINTER);
            memcpy(dst, src, t.nbytes);
        }
        if (pass == 0) {
            MCU_CHECK(execute(p, method, arenas, arena_sizes, n_arenas, input_rows, context));
        }
    }
    return MCU_OK;
}

mcu_status mcu_program_run(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                           const uint32_t *arena_sizes, uint32_t n_arenas, const void *const *inputs,
                           void *const *outputs)
{
    whole_input w = {NULL, 0, 0};
    return run_io(p, method, arenas, arena_sizes, n_arenas, inputs, outputs, NULL, NULL, &w);
}

mcu_status mcu_program_run_streamed(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                                    const uint32_t *arena_sizes, uint32_t n_arenas, const void *const *inputs,
                                    void *const *outputs, mcu_program_input_rows_fn input_rows, void *context)
{
    return run_io(p, method, arenas, arena_sizes, n_arenas, inputs, outputs, input_rows, context, NULL);
}

mcu_status mcu_program_bundled(const mcu_program *p, uint32_t method, uint32_t vector, uint32_t expected,
                               uint32_t index, const uint8_t **data, uint32_t *size, float *tolerance)
{
    MCU_REQUIRE(p != NULL && data != NULL && size != NULL && tolerance != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_fbt root, m, b;
    mcu_program_reader(p, &f, &root);
    mcu_program_method_table(&f, p, method, &m);
    uint32_t n;
    mcu_fb_vector(&f, &m, MCU_METHOD_BUNDLED, 4, &n);
    MCU_REQUIRE(m.pos != 0 && vector < n, MCU_ERR_NOT_FOUND);
    mcu_fb_table_at(&f, &m, MCU_METHOD_BUNDLED, vector, &b);
    const uint32_t seg = mcu_fb_u32_at(&f, &b, expected ? MCU_BUNDLED_EXPECTED : MCU_BUNDLED_INPUTS, index);
    MCU_REQUIRE(seg != MCU_FB_ABSENT_INDEX, MCU_ERR_NOT_FOUND);
    const uint32_t tol = mcu_fb_u32_at(&f, &b, MCU_BUNDLED_TOLERANCES, index);
    const float exact = -1.0f;
    memcpy(tolerance, expected && tol != MCU_FB_ABSENT_INDEX ? (const void *)&tol : (const void *)&exact, 4);
    return mcu_program_segment(&f, p, seg, data, size);
}
