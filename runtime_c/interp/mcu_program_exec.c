/* Running a verified program: method and tensor queries, execution, bundled vectors. */
#include <string.h>

#include "mcu_program_internal.h"

#ifndef MCU_PROGRAM_TRACE_OP
/* Per-op tracing hook, as MCU_TRACE_OP in generated code: define it to profile each instruction. */
#define MCU_PROGRAM_TRACE_OP(method, index, name) ((void)0)
#endif

void mcu_program_tensor(mcu_fb *f, const mcu_program *q, uint32_t t, mcu_program_tensor_desc *d)
{
    (void)q;
    d->dtype = mcu_fb_scalar(f, t, MCU_TENSOR_DTYPE, 1, 0);
    d->placement = mcu_fb_scalar(f, t, MCU_TENSOR_PLACEMENT, 1, 0);
    d->index = mcu_fb_scalar(f, t, MCU_TENSOR_INDEX, 4, 0);
    d->offset = mcu_fb_scalar(f, t, MCU_TENSOR_OFFSET, 4, 0);
    d->nbytes = mcu_fb_scalar(f, t, MCU_TENSOR_NBYTES, 4, 0);
}

mcu_status mcu_program_segment(mcu_fb *f, const mcu_program *q, uint32_t index, const uint8_t **data,
                               uint32_t *size)
{
    uint32_t n;
    mcu_fb_vector(f, q->root, MCU_PROGRAM_SEGMENTS, 4, &n);
    MCU_REQUIRE(index < n, MCU_ERR_PROGRAM_INVALID);
    const uint32_t s = mcu_fb_table_at(f, q->root, MCU_PROGRAM_SEGMENTS, index);
    const uint32_t location = mcu_fb_scalar(f, s, MCU_SEGMENT_LOCATION, 1, 0);
    const uint32_t offset = mcu_fb_scalar(f, s, MCU_SEGMENT_OFFSET, 4, 0);
    *size = mcu_fb_scalar(f, s, MCU_SEGMENT_SIZE, 4, 0);
    const uint8_t *base = location == MCU_SEGMENT_INLINE ? q->data : q->weights;
    const uint32_t limit = location == MCU_SEGMENT_INLINE ? q->data_size : q->weights_size;
    MCU_REQUIRE(!f->bad && location <= MCU_SEGMENT_EXTERNAL && base != NULL && offset % MCU_PROGRAM_ALIGN == 0 &&
                    (uint64_t)offset + *size <= limit,
                MCU_ERR_PROGRAM_INVALID);
    *data = base + offset;
    return MCU_OK;
}

mcu_status mcu_program_method(const mcu_program *p, uint32_t method, mcu_program_method_info *info)
{
    MCU_REQUIRE(p != NULL && info != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_program_reader(p, &f);
    const uint32_t m = mcu_program_method_table(&f, p, method);
    MCU_REQUIRE(m != 0, MCU_ERR_NOT_FOUND);
    memset(info, 0, sizeof(*info));
    info->name = mcu_fb_string(&f, m, MCU_METHOD_NAME);
    mcu_fb_vector(&f, m, MCU_METHOD_INPUTS, 4, &info->n_inputs);
    mcu_fb_vector(&f, m, MCU_METHOD_OUTPUTS, 4, &info->n_outputs);
    mcu_fb_vector(&f, m, MCU_METHOD_INSTRUCTIONS, 4, &info->n_instructions);
    mcu_fb_vector(&f, m, MCU_METHOD_BUNDLED, 4, &info->n_bundled);
    uint32_t n;
    mcu_fb_vector(&f, m, MCU_METHOD_ARENA_SIZES, 4, &n);
    MCU_REQUIRE(n <= MCU_PROGRAM_MAX_ARENAS, MCU_ERR_PROGRAM_INVALID);
    info->n_arenas = n;
    for (uint32_t i = 0; i < n; ++i) {
        info->arena_sizes[i] = mcu_fb_u32_at(&f, m, MCU_METHOD_ARENA_SIZES, i);
    }
    return f.bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

mcu_status mcu_program_find_method(const mcu_program *p, const char *name, uint32_t *method)
{
    MCU_REQUIRE(p != NULL && name != NULL && method != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_program_reader(p, &f);
    for (uint32_t i = 0; i < p->n_methods; ++i) {
        if (mcu_program_streq(mcu_fb_string(&f, mcu_program_method_table(&f, p, i), MCU_METHOD_NAME), name)) {
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
    mcu_program_reader(p, &f);
    const uint32_t m = mcu_program_method_table(&f, p, method);
    MCU_REQUIRE(m != 0, MCU_ERR_NOT_FOUND);
    const uint32_t id = mcu_fb_u32_at(&f, m, output ? MCU_METHOD_OUTPUTS : MCU_METHOD_INPUTS, index);
    MCU_REQUIRE(id != MCU_FB_ABSENT_INDEX, MCU_ERR_NOT_FOUND);
    const uint32_t t = mcu_fb_table_at(&f, m, MCU_METHOD_TENSORS, id);
    mcu_program_tensor_desc d;
    mcu_program_tensor(&f, p, t, &d);
    memset(info, 0, sizeof(*info));
    info->name = mcu_fb_string(&f, t, MCU_TENSOR_NAME);
    info->dtype = d.dtype;
    info->arena = d.index;
    info->offset = d.offset;
    info->nbytes = d.nbytes;
    const uint32_t shape = mcu_fb_vector(&f, t, MCU_TENSOR_SHAPE, 4, &info->rank);
    uint32_t n_order;
    const uint32_t order = mcu_fb_vector(&f, t, MCU_TENSOR_DIM_ORDER, 1, &n_order);
    MCU_REQUIRE(!f.bad && info->rank <= MCU_PROGRAM_MAX_RANK && n_order == info->rank, MCU_ERR_PROGRAM_INVALID);
    for (uint32_t i = 0; i < info->rank; ++i) {
        info->shape[i] = (int32_t)mcu_fb_u32(&f, (uint64_t)shape + 4u * i);
        info->dim_order[i] = f.b[order + i];
    }
    const uint32_t quant = mcu_fb_child(&f, t, MCU_TENSOR_QUANT);
    uint32_t n_scale;
    const uint32_t scale = mcu_fb_vector(&f, quant, MCU_QUANT_SCALE, 4, &n_scale);
    const uint32_t zp = mcu_fb_vector(&f, quant, MCU_QUANT_ZERO_POINT, 4, &n_scale);
    if (n_scale == 1 && !f.bad) {
        info->quantized = 1;
        memcpy(&info->scale, f.b + scale, 4);
        memcpy(&info->zero_point, f.b + zp, 4);
    }
    return f.bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

/* Pointer to tensor `id` of method table `m`, or NULL for id -1. */
static void *tensor_ptr(mcu_fb *f, const mcu_program *p, uint32_t m, int32_t id, uint8_t *const *arenas,
                        uint32_t *nbytes, uint32_t *dtype)
{
    *nbytes = 0;
    if (id < 0) {
        return NULL;
    }
    mcu_program_tensor_desc d;
    mcu_program_tensor(f, p, mcu_fb_table_at(f, m, MCU_METHOD_TENSORS, (uint32_t)id), &d);
    *nbytes = d.nbytes;
    *dtype = d.dtype;
    if (d.placement == MCU_PLACEMENT_ARENA) {
        return d.index < MCU_PROGRAM_MAX_ARENAS ? arenas[d.index] + d.offset : NULL;
    }
    const uint8_t *data;
    uint32_t size;
    if (mcu_program_segment(f, p, d.index, &data, &size) != MCU_OK) {
        return NULL;
    }
    /* Constants are only ever read: the verifier keeps them out of every output operand. */
    return (void *)(uintptr_t)(data + d.offset);
}

static mcu_status run_delegate(mcu_fb *f, const mcu_program *p, void *const *ops, const uint32_t *sizes,
                               uint32_t n_ops, const int32_t *params)
{
    const uint32_t d = mcu_fb_table_at(f, p->root, MCU_PROGRAM_DELEGATES, (uint32_t)params[0]);
    const char *id = mcu_fb_string(f, d, MCU_DELEGATE_BACKEND);
    const uint8_t *payload;
    uint32_t size;
    MCU_CHECK(mcu_program_segment(f, p, mcu_fb_scalar(f, d, MCU_DELEGATE_SEGMENT, 4, 0), &payload, &size));
    for (uint32_t i = 0; i < p->n_delegates; ++i) {
        const mcu_delegate *b = &p->delegates[i];
        if (b->backend_id != NULL && mcu_program_streq(b->backend_id, id) && b->execute != NULL) {
            return b->execute(b->context, payload, size, ops, sizes, n_ops, (uint32_t)params[1]);
        }
    }
    return MCU_ERR_UNSUPPORTED;
}

mcu_status mcu_program_execute(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                               const uint32_t *arena_sizes, uint32_t n_arenas)
{
    MCU_REQUIRE(p != NULL && (n_arenas == 0 || (arenas != NULL && arena_sizes != NULL)), MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_program_reader(p, &f);
    const uint32_t m = mcu_program_method_table(&f, p, method);
    MCU_REQUIRE(m != 0, MCU_ERR_NOT_FOUND);
    uint32_t n;
    mcu_fb_vector(&f, m, MCU_METHOD_ARENA_SIZES, 4, &n);
    MCU_REQUIRE(n <= n_arenas && n <= MCU_PROGRAM_MAX_ARENAS, MCU_ERR_BUFFER_TOO_SMALL);
    uint8_t *bases[MCU_PROGRAM_MAX_ARENAS] = {NULL};
    for (uint32_t i = 0; i < n; ++i) {
        MCU_REQUIRE(arenas[i] != NULL, MCU_ERR_NULL_POINTER);
        MCU_REQUIRE((uintptr_t)arenas[i] % MCU_PROGRAM_ALIGN == 0, MCU_ERR_INVALID_ARG);
        MCU_REQUIRE(arena_sizes[i] >= mcu_fb_u32_at(&f, m, MCU_METHOD_ARENA_SIZES, i), MCU_ERR_BUFFER_TOO_SMALL);
        bases[i] = arenas[i];
    }
    const uint32_t iv = mcu_fb_vector(&f, m, MCU_METHOD_INSTRUCTIONS, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t insn = mcu_fb_elem_table(&f, iv, i);
        const uint32_t kernel = mcu_fb_scalar(&f, insn, MCU_INSN_KERNEL, 2, 0);
        uint32_t n_ops, n_params;
        const uint32_t ov = mcu_fb_vector(&f, insn, MCU_INSN_OPERANDS, 4, &n_ops);
        const uint32_t pv = mcu_fb_vector(&f, insn, MCU_INSN_PARAMS, 4, &n_params);
        MCU_REQUIRE(!f.bad && n_ops >= 1 && n_ops <= MCU_PROGRAM_MAX_OPERANDS && n_params <= MCU_PROGRAM_MAX_PARAMS,
                    MCU_ERR_PROGRAM_INVALID);
        void *ops[MCU_PROGRAM_MAX_OPERANDS];
        uint32_t sizes[MCU_PROGRAM_MAX_OPERANDS];
        uint32_t dtype = 0;
        for (uint32_t k = 0; k < n_ops; ++k) {
            uint32_t dt = 0;
            ops[k] = tensor_ptr(&f, p, m, (int32_t)mcu_fb_u32(&f, (uint64_t)ov + 4u * k), bases, &sizes[k], &dt);
            if (k == 0) {
                dtype = dt;
            }
        }
        int32_t params[MCU_PROGRAM_MAX_PARAMS];
        memcpy(params, f.b + pv, n_params * sizeof(int32_t));
        MCU_REQUIRE(!f.bad, MCU_ERR_PROGRAM_INVALID);
        MCU_PROGRAM_TRACE_OP(method, i, mcu_fb_string(&f, insn, MCU_INSN_NAME));
        if (kernel == MCU_K_DELEGATE) {
            MCU_CHECK(run_delegate(&f, p, ops, sizes, n_ops, params));
        } else {
            MCU_CHECK(mcu_program_dispatch(kernel, ops, sizes, n_ops, params, n_params,
                                           (int32_t)mcu_dtype_size(dtype)));
        }
    }
    return f.bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

mcu_status mcu_program_run(const mcu_program *p, uint32_t method, uint8_t *const *arenas,
                           const uint32_t *arena_sizes, uint32_t n_arenas, const void *const *inputs,
                           void *const *outputs)
{
    mcu_program_method_info mi;
    MCU_CHECK(mcu_program_method(p, method, &mi));
    MCU_REQUIRE((inputs != NULL || mi.n_inputs == 0) && (outputs != NULL || mi.n_outputs == 0),
                MCU_ERR_NULL_POINTER);
    MCU_REQUIRE(mi.n_arenas <= n_arenas, MCU_ERR_BUFFER_TOO_SMALL);
    for (uint32_t pass = 0; pass < 2; ++pass) {
        const uint32_t count = pass ? mi.n_outputs : mi.n_inputs;
        for (uint32_t i = 0; i < count; ++i) {
            mcu_program_tensor_info t;
            MCU_CHECK(mcu_program_io(p, method, pass, i, &t));
            MCU_REQUIRE(t.arena < mi.n_arenas && arenas[t.arena] != NULL &&
                            (uint64_t)t.offset + t.nbytes <= arena_sizes[t.arena],
                        MCU_ERR_BUFFER_TOO_SMALL);
            if (pass == 0) {
                MCU_REQUIRE(inputs[i] != NULL, MCU_ERR_NULL_POINTER);
                memcpy(arenas[t.arena] + t.offset, inputs[i], t.nbytes);
            } else {
                MCU_REQUIRE(outputs[i] != NULL, MCU_ERR_NULL_POINTER);
                memcpy(outputs[i], arenas[t.arena] + t.offset, t.nbytes);
            }
        }
        if (pass == 0) {
            MCU_CHECK(mcu_program_execute(p, method, arenas, arena_sizes, n_arenas));
        }
    }
    return MCU_OK;
}

mcu_status mcu_program_bundled(const mcu_program *p, uint32_t method, uint32_t vector, uint32_t expected,
                               uint32_t index, const uint8_t **data, uint32_t *size, float *tolerance)
{
    MCU_REQUIRE(p != NULL && data != NULL && size != NULL && tolerance != NULL, MCU_ERR_NULL_POINTER);
    mcu_fb f;
    mcu_program_reader(p, &f);
    const uint32_t m = mcu_program_method_table(&f, p, method);
    uint32_t n;
    mcu_fb_vector(&f, m, MCU_METHOD_BUNDLED, 4, &n);
    MCU_REQUIRE(m != 0 && vector < n, MCU_ERR_NOT_FOUND);
    const uint32_t b = mcu_fb_table_at(&f, m, MCU_METHOD_BUNDLED, vector);
    const uint32_t seg = mcu_fb_u32_at(&f, b, expected ? MCU_BUNDLED_EXPECTED : MCU_BUNDLED_INPUTS, index);
    MCU_REQUIRE(seg != MCU_FB_ABSENT_INDEX, MCU_ERR_NOT_FOUND);
    const uint32_t tol = mcu_fb_u32_at(&f, b, MCU_BUNDLED_TOLERANCES, index);
    const float exact = -1.0f;
    memcpy(tolerance, expected && tol != MCU_FB_ABSENT_INDEX ? (const void *)&tol : (const void *)&exact, 4);
    return mcu_program_segment(&f, p, seg, data, size);
}
