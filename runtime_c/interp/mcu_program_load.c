/* Loading a program: the header, the CRC-32 and a complete verification of
 * the flatbuffer and of every method before the program can be used. */
#include <string.h>

#include "mcu_program_internal.h"

typedef struct {
    char magic[4];
    uint32_t version;
    uint32_t header_size;
    uint32_t total;
    uint32_t fb_offset;
    uint32_t fb_size;
    uint32_t data_offset;
    uint32_t data_size;
    uint8_t content_id[16];
    uint32_t flags;
    uint32_t reserved[2];
    uint32_t crc;
} mcu_file_header;

_Static_assert(sizeof(mcu_file_header) == MCU_PROGRAM_HEADER_SIZE, "file header layout");

/* CRC-32 (IEEE 802.3, reflected), four bits at a time: a 64-byte table. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, uint32_t n)
{
    static const uint32_t table[16] = {
        0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
        0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
    };
    crc = ~crc;
    for (uint32_t i = 0; i < n; ++i) {
        crc ^= p[i];
        crc = (crc >> 4) ^ table[crc & 15u];
        crc = (crc >> 4) ^ table[crc & 15u];
    }
    return ~crc;
}

/* Bit 0 of a program header's flags: it expects external weights. Weights files set no flag. */
#define MCU_HEADER_EXTERNAL_WEIGHTS 1u

/* `known`: the header flags this kind of file may set; `checksum`: the status of a CRC mismatch (so that a
 * weights file's own CRC is reported against the weights, not the program). */
static mcu_status read_header(const uint8_t *b, uint32_t size, const char *magic, mcu_file_header *h,
                              uint32_t flags, uint32_t known, mcu_status checksum)
{
    MCU_REQUIRE(size >= MCU_PROGRAM_HEADER_SIZE, MCU_ERR_PROGRAM_TRUNCATED);
    memcpy(h, b, sizeof(*h));
    MCU_REQUIRE(memcmp(h->magic, magic, 4) == 0, MCU_ERR_PROGRAM_INVALID);
    MCU_REQUIRE(h->version == MCU_PROGRAM_FORMAT_VERSION, MCU_ERR_PROGRAM_VERSION);
    MCU_REQUIRE(h->total <= size, MCU_ERR_PROGRAM_TRUNCATED);
    MCU_REQUIRE(h->total == size, MCU_ERR_PROGRAM_OVERSIZED);
    MCU_REQUIRE(h->header_size == MCU_PROGRAM_HEADER_SIZE && h->fb_offset == MCU_PROGRAM_HEADER_SIZE &&
                    (uint64_t)h->fb_offset + h->fb_size <= h->data_offset &&
                    h->data_offset % MCU_PROGRAM_ALIGN == 0 &&
                    (uint64_t)h->data_offset + h->data_size == h->total && h->total <= INT32_MAX &&
                    h->reserved[0] == 0 && h->reserved[1] == 0 && (h->flags & ~known) == 0,
                MCU_ERR_PROGRAM_INVALID);
    if ((flags & MCU_PROGRAM_SKIP_CHECKSUM) == 0) {
        const uint32_t crc = crc32_update(crc32_update(0, b, 60), b + 64, h->total - 64);
        MCU_REQUIRE(crc == h->crc, checksum);
    }
    /* The bytes between the flatbuffer and the data hold nothing: zero, so that no byte of a file is free. */
    for (uint32_t i = h->fb_offset + h->fb_size; i < h->data_offset; ++i) {
        MCU_REQUIRE(b[i] == 0, MCU_ERR_PROGRAM_INVALID);
    }
    return MCU_OK;
}

mcu_status mcu_program_declared_size(const void *buffer, uint32_t size, uint32_t *total)
{
    MCU_REQUIRE(buffer != NULL && total != NULL, MCU_ERR_NULL_POINTER);
    mcu_file_header h;
    MCU_REQUIRE(size >= MCU_PROGRAM_HEADER_SIZE, MCU_ERR_PROGRAM_TRUNCATED);
    memcpy(&h, buffer, sizeof(h));
    MCU_REQUIRE(memcmp(h.magic, "MCUP", 4) == 0 || memcmp(h.magic, "MCUW", 4) == 0, MCU_ERR_PROGRAM_INVALID);
    MCU_REQUIRE(h.version == MCU_PROGRAM_FORMAT_VERSION, MCU_ERR_PROGRAM_VERSION);
    MCU_REQUIRE(h.total <= size, MCU_ERR_PROGRAM_TRUNCATED);
    *total = h.total;
    return MCU_OK;
}

static const mcu_delegate_backend *find_backend(const mcu_program *q, const char *id)
{
    if (id != NULL) {
        return mcu_delegate_find(q->delegates, q->n_delegates, id);
    }
    return NULL;
}

static mcu_status verify_tensor(mcu_fb *f, const mcu_program *q, const mcu_fbt *m, uint32_t id,
                                const uint32_t *arenas, uint32_t n_arenas)
{
    mcu_fbt t, quant;
    mcu_program_tensor_desc d;
    mcu_program_tensor(f, m, id, &t, &d);
    const uint32_t esize = mcu_dtype_size(d.dtype);
    uint32_t rank, n_order;
    const uint32_t shape = mcu_fb_vector(f, &t, MCU_TENSOR_SHAPE, 4, &rank);
    const uint32_t order = mcu_fb_vector(f, &t, MCU_TENSOR_DIM_ORDER, 1, &n_order);
    (void)mcu_fb_string(f, &t, MCU_TENSOR_NAME);
    MCU_REQUIRE(!f->bad && esize != 0 && rank <= MCU_PROGRAM_MAX_RANK && n_order == rank, MCU_ERR_PROGRAM_INVALID);
    uint64_t bytes = esize;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < rank; ++i) {
        const uint32_t dim = mcu_fb_u32(f, shape + 4u * i);
        const uint32_t o = f->b[order + i];
        MCU_REQUIRE(dim <= INT32_MAX && o < rank && (seen & (1u << o)) == 0, MCU_ERR_PROGRAM_INVALID);
        seen |= 1u << o;
        bytes *= dim;
        if (bytes > INT32_MAX) {
            bytes = (uint64_t)INT32_MAX + 1u;
        }
    }
    MCU_REQUIRE(bytes == d.nbytes && d.offset % esize == 0, MCU_ERR_PROGRAM_INVALID);
    if (mcu_fb_child(f, &t, MCU_TENSOR_QUANT, &quant) != 0) {
        uint32_t n_scale, n_zp;
        mcu_fb_vector(f, &quant, MCU_QUANT_SCALE, 4, &n_scale);
        mcu_fb_vector(f, &quant, MCU_QUANT_ZERO_POINT, 4, &n_zp);
        const int32_t axis = (int32_t)mcu_fb_scalar(f, &quant, MCU_QUANT_AXIS, 4, 0xFFFFFFFFu);
        MCU_REQUIRE(n_scale == n_zp && n_scale >= 1 && axis >= -1 && axis < (int32_t)rank, MCU_ERR_PROGRAM_INVALID);
    }
    uint32_t limit;
    if (d.placement == MCU_PLACEMENT_ARENA) {
        MCU_REQUIRE(d.index < n_arenas, MCU_ERR_PROGRAM_INVALID);
        limit = arenas[d.index];
    } else if (d.placement == MCU_PLACEMENT_STREAMED) {
        /* In no memory: rows of a batch-1 image (logical N, C, H, W), read whole rows at a time. */
        const uint32_t rows = rank == 4 ? mcu_fb_u32(f, shape + 8u) : 0u;
        MCU_REQUIRE(!f->bad && rank == 4 && mcu_fb_u32(f, shape) == 1u && rows >= 1u && d.nbytes % rows == 0 &&
                        d.index == 0 && d.offset == 0,
                    MCU_ERR_PROGRAM_INVALID);
        limit = d.nbytes;
    } else {
        const uint8_t *data;
        MCU_REQUIRE(d.placement == MCU_PLACEMENT_CONSTANT && mcu_program_segment(f, q, d.index, &data, &limit) == MCU_OK,
                    MCU_ERR_PROGRAM_INVALID);
    }
    MCU_REQUIRE(d.offset <= limit && bytes <= limit - d.offset && !f->bad, MCU_ERR_PROGRAM_INVALID);
    return MCU_OK;
}

/* The checks of one call with its operands where they are: a kernel's contract, a delegate's operands, or
 * the interpreter's own fill and move. */
static mcu_status check_call(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops, const int32_t *params,
                             uint32_t n_params, uint32_t n_program_delegates)
{
    if (kernel == MCU_K_FILL) {
        MCU_REQUIRE(n_ops == 1 && n_params == 1 && ops[0].present && !ops[0].constant && params[0] >= -128 &&
                        params[0] <= 255,
                    MCU_ERR_PROGRAM_INVALID);
        return MCU_OK;
    }
    if (kernel == MCU_K_MOVE) {
        MCU_REQUIRE(n_ops == 2 && n_params == 0 && ops[0].present && ops[1].present && !ops[0].constant &&
                        !ops[1].constant && ops[0].nbytes == ops[1].nbytes,
                    MCU_ERR_PROGRAM_INVALID);
        return MCU_OK;
    }
    if (kernel != MCU_K_DELEGATE) {
        return mcu_program_check_kernel(kernel, ops, n_ops, params, n_params);
    }
    /* Delegate: params are the delegate index and the number of outputs (the last operands). */
    MCU_REQUIRE(n_params == 2 && (uint32_t)params[0] < n_program_delegates && params[1] >= 1 &&
                    (uint32_t)params[1] <= n_ops,
                MCU_ERR_PROGRAM_INVALID);
    for (uint32_t i = n_ops - (uint32_t)params[1]; i < n_ops; ++i) {
        MCU_REQUIRE(ops[i].present && !ops[i].constant, MCU_ERR_PROGRAM_INVALID);
    }
    return MCU_OK;
}

/* One instruction as the checks see it: its kernel, operands where the method places them, params, and
 * its loop fields. */
typedef struct {
    uint32_t kernel, n_ops, n_params;
    mcu_operand_desc ops[MCU_PROGRAM_MAX_OPERANDS];
    int32_t params[MCU_PROGRAM_MAX_PARAMS];
    mcu_program_step step;
} insn_view;

/* Instruction `index`, in a loop of `count` iterations (0: in none), read and checked as far as it can be
 * without its operands' places at run time. No instruction but MCU_K_ROWS names a streamed input. */
static mcu_status read_instruction(mcu_fb *f, const mcu_program *q, const mcu_fbt *m, uint32_t index,
                                   uint32_t n_tensors, uint32_t count, insn_view *v)
{
    mcu_fbt insn, t;
    mcu_fb_table_at(f, m, MCU_METHOD_INSTRUCTIONS, index, &insn);
    v->kernel = mcu_fb_scalar(f, &insn, MCU_INSN_KERNEL, 2, 0);
    const uint32_t ov = mcu_fb_vector(f, &insn, MCU_INSN_OPERANDS, 4, &v->n_ops);
    const uint32_t pv = mcu_fb_vector(f, &insn, MCU_INSN_PARAMS, 4, &v->n_params);
    (void)mcu_fb_string(f, &insn, MCU_INSN_NAME);
    MCU_REQUIRE(!f->bad && v->n_ops <= MCU_PROGRAM_MAX_OPERANDS && v->n_params <= MCU_PROGRAM_MAX_PARAMS &&
                    v->kernel != MCU_K_LOOP && v->kernel != MCU_K_ROWS && (count == 0 || v->kernel != MCU_K_DELEGATE),
                MCU_ERR_PROGRAM_INVALID);
    mcu_program_step_fields(f, &insn, v->n_ops, count, &v->step);
    MCU_REQUIRE(!f->bad, MCU_ERR_PROGRAM_INVALID);
    memcpy(v->params, f->b + pv, v->n_params * sizeof(int32_t));
    for (uint32_t i = 0; i < v->n_ops; ++i) {
        const int32_t id = (int32_t)mcu_fb_u32(f, ov + 4u * i);
        mcu_program_tensor_desc d = {0, 0, 0, 0, 0};
        MCU_REQUIRE(id >= -1 && id < (int32_t)n_tensors, MCU_ERR_PROGRAM_INVALID);
        if (id >= 0) {
            mcu_program_tensor(f, m, (uint32_t)id, &t, &d);
        }
        MCU_REQUIRE(d.placement != MCU_PLACEMENT_STREAMED, MCU_ERR_PROGRAM_INVALID);
        mcu_operand_desc *o = &v->ops[i];
        o->present = id >= 0;
        o->dtype = d.dtype;
        o->nbytes = d.nbytes;
        o->constant = d.placement != MCU_PLACEMENT_ARENA;
        o->arena = d.index;
        o->offset = d.offset;
        o->data = NULL;
        /* Only arena operands move; verify_tensor has proved each tensor's first place. */
        MCU_REQUIRE(v->step.strides[i] == 0 || (id >= 0 && !o->constant), MCU_ERR_PROGRAM_INVALID);
        if (id >= 0 && o->constant) {
            uint32_t seg_size; /* verify_tensor has proved the segment holds [offset, offset + nbytes) */
            MCU_CHECK(mcu_program_segment(f, q, d.index, &o->data, &seg_size));
            o->data += d.offset;
        }
    }
    return MCU_OK;
}

/* Instruction `v` with each operand moved `moves[k]` bytes (NULL: none): every moved operand is an arena
 * operand that stays in its arena, aligned, and the call passes its checks there. */
static mcu_status check_moved(const insn_view *v, const int64_t *moves, const uint32_t *arenas,
                              uint32_t n_program_delegates)
{
    mcu_operand_desc at[MCU_PROGRAM_MAX_OPERANDS];
    for (uint32_t i = 0; i < v->n_ops; ++i) {
        at[i] = v->ops[i];
        if (moves != NULL && moves[i] != 0) {
            const int64_t offset = (int64_t)v->ops[i].offset + moves[i];
            MCU_REQUIRE(v->ops[i].present && !v->ops[i].constant && offset >= 0 &&
                            offset + (int64_t)v->ops[i].nbytes <= (int64_t)arenas[v->ops[i].arena] &&
                            offset % (int64_t)mcu_dtype_size(v->ops[i].dtype) == 0,
                        MCU_ERR_PROGRAM_INVALID);
            at[i].offset = (uint32_t)offset;
        }
    }
    return check_call(v->kernel, at, v->n_ops, v->params, v->n_params, n_program_delegates);
}

/* Instruction `index`, in a loop of `count` iterations (0: in none): at every iteration it runs at, each arena
 * operand moved by its stride lies in its arena and the call passes its checks there. */
static mcu_status verify_instruction(mcu_fb *f, const mcu_program *q, const mcu_fbt *m, uint32_t index,
                                     uint32_t n_tensors, uint32_t n_program_delegates, const uint32_t *arenas,
                                     uint32_t count)
{
    insn_view v;
    MCU_CHECK(read_instruction(f, q, m, index, n_tensors, count, &v));
    int moves = 0;
    for (uint32_t i = 0; i < v.n_ops; ++i) {
        moves |= v.step.strides[i] != 0;
    }
    /* Without strides every iteration checks the same call: once is enough. */
    const uint32_t end = moves ? v.step.end : v.step.first + 1u;
    for (uint32_t it = v.step.first; it < end; ++it) {
        int64_t at[MCU_PROGRAM_MAX_OPERANDS];
        for (uint32_t i = 0; i < v.n_ops; ++i) {
            at[i] = (int64_t)v.step.strides[i] * (int64_t)(it - v.step.first);
        }
        MCU_CHECK(check_moved(&v, at, arenas, n_program_delegates));
    }
    return MCU_OK;
}

/* A streamed prefix's check: the walk of mcu_program_rows.c with every body call checked where it runs. */
typedef struct {
    mcu_rows_visitor v;
    mcu_fb *f;
    const mcu_program *q;
    const mcu_fbt *m;
    uint32_t first, n_tensors, n_program_delegates;
    const uint32_t *arenas;
} rows_check;

static mcu_status rows_check_move(mcu_rows_visitor *v, uint32_t to, uint32_t from, uint32_t bytes)
{
    (void)v, (void)to, (void)from, (void)bytes; /* the walk has proved both ranges inside the rings */
    return MCU_OK;
}

static mcu_status rows_check_read(mcu_rows_visitor *v, int32_t y, int32_t rows, uint32_t at, uint32_t bytes)
{
    (void)v, (void)y, (void)rows, (void)at, (void)bytes; /* likewise */
    return MCU_OK;
}

static mcu_status rows_check_call(mcu_rows_visitor *v, uint32_t body, const int64_t *moves)
{
    rows_check *c = (rows_check *)(void *)v;
    insn_view view;
    MCU_CHECK(read_instruction(c->f, c->q, c->m, c->first + body, c->n_tensors, 0, &view));
    for (uint32_t i = view.n_ops; i < MCU_PROGRAM_MAX_OPERANDS; ++i) {
        MCU_REQUIRE(moves[i] == 0, MCU_ERR_PROGRAM_INVALID); /* a row of an operand the call lacks */
    }
    return check_moved(&view, moves, c->arenas, c->n_program_delegates);
}

/* A MCU_K_ROWS instruction at `index` with `left` instructions after it: its table, rings and streamed input,
 * then the whole schedule replayed with every row call checked where it runs; `body` its body's length. */
static mcu_status verify_rows(mcu_fb *f, const mcu_program *q, const mcu_fbt *m, uint32_t index, uint32_t left,
                              uint32_t n_tensors, uint32_t n_program_delegates, const uint32_t *arenas, uint32_t *body)
{
    mcu_fbt insn, t;
    mcu_fb_table_at(f, m, MCU_METHOD_INSTRUCTIONS, index, &insn);
    uint32_t n_ops, n_params;
    const uint32_t ov = mcu_fb_vector(f, &insn, MCU_INSN_OPERANDS, 4, &n_ops);
    const uint32_t pv = mcu_fb_vector(f, &insn, MCU_INSN_PARAMS, 4, &n_params);
    (void)mcu_fb_string(f, &insn, MCU_INSN_NAME);
    mcu_program_step step;
    mcu_program_step_fields(f, &insn, 0, 0, &step);
    MCU_REQUIRE(!f->bad && n_ops == 3 && n_params == MCU_ROWS_N_PARAMS, MCU_ERR_PROGRAM_INVALID);
    int32_t params[MCU_ROWS_N_PARAMS];
    memcpy(params, f->b + pv, sizeof(params));
    mcu_program_tensor_desc d[3];
    for (uint32_t i = 0; i < 3; ++i) {
        const int32_t id = (int32_t)mcu_fb_u32(f, ov + 4u * i);
        MCU_REQUIRE(id >= (i == 0 ? 0 : -1) && id < (int32_t)n_tensors, MCU_ERR_PROGRAM_INVALID);
        memset(&d[i], 0, sizeof(d[i]));
        d[i].placement = 0xFFu; /* absent */
        if (id >= 0) {
            mcu_program_tensor(f, m, (uint32_t)id, &t, &d[i]);
        }
    }
    /* The table: int32 constant words; the rings: int8 arena bytes; the streamed input: one. */
    const uint8_t *table;
    uint32_t seg_size;
    MCU_REQUIRE(!f->bad && d[0].placement == MCU_PLACEMENT_CONSTANT && d[0].dtype == 3u &&
                    (d[1].placement == 0xFFu || (d[1].placement == MCU_PLACEMENT_ARENA && d[1].dtype == 1u)) &&
                    (d[2].placement == 0xFFu || d[2].placement == MCU_PLACEMENT_STREAMED),
                MCU_ERR_PROGRAM_INVALID);
    MCU_CHECK(mcu_program_segment(f, q, d[0].index, &table, &seg_size));
    mcu_rows_table tbl;
    MCU_CHECK(mcu_rows_table_init(&tbl, table + d[0].offset, d[0].nbytes / 4u, params, n_params,
                                  d[1].placement == MCU_PLACEMENT_ARENA ? d[1].nbytes : 0u));
    *body = tbl.n[MCU_ROWS_BODY];
    MCU_REQUIRE(*body <= left, MCU_ERR_PROGRAM_INVALID);
    for (uint32_t j = 1; j <= *body; ++j) { /* every body instruction well formed, a step naming it or not */
        insn_view view;
        MCU_CHECK(read_instruction(f, q, m, index + j, n_tensors, 0, &view));
        MCU_REQUIRE(view.kernel != MCU_K_DELEGATE, MCU_ERR_PROGRAM_INVALID); /* a partition runs whole */
    }
    /* The streamed input's entry: its rows and a ring of its whole rows, or no rows without one. */
    const int32_t *input = tbl.ops + 2u * tbl.n[MCU_ROWS_OPS];
    if (d[2].placement == MCU_PLACEMENT_STREAMED) {
        mcu_program_tensor(f, m, mcu_fb_u32(f, ov + 8u), &t, &d[2]);
        uint32_t rank;
        const uint32_t shape = mcu_fb_vector(f, &t, MCU_TENSOR_SHAPE, 4, &rank);
        MCU_REQUIRE(!f->bad && rank == 4 && input[0] == (int32_t)mcu_fb_u32(f, shape + 8u) && input[1] >= 0 &&
                        input[1] < (int32_t)tbl.n[MCU_ROWS_RINGS] &&
                        (uint64_t)tbl.rings[5u * (uint32_t)input[1] + 1u] * (uint64_t)input[0] == d[2].nbytes,
                    MCU_ERR_PROGRAM_INVALID);
    } else {
        MCU_REQUIRE(input[0] == 0, MCU_ERR_PROGRAM_INVALID);
    }
    rows_check c = {{.move = rows_check_move, .read = rows_check_read, .call = rows_check_call}, f, q, m, index + 1u, n_tensors,
                    n_program_delegates, arenas};
    return mcu_rows_walk(&tbl, &c.v);
}

/* A loop instruction at `index` with `left` instructions after it: no operands, params count and body. */
static mcu_status verify_loop(mcu_fb *f, const mcu_fbt *m, uint32_t index, uint32_t left, uint32_t *count,
                              uint32_t *body)
{
    mcu_fbt insn;
    mcu_fb_table_at(f, m, MCU_METHOD_INSTRUCTIONS, index, &insn);
    uint32_t n_ops, n_params;
    mcu_fb_vector(f, &insn, MCU_INSN_OPERANDS, 4, &n_ops);
    const uint32_t pv = mcu_fb_vector(f, &insn, MCU_INSN_PARAMS, 4, &n_params);
    (void)mcu_fb_string(f, &insn, MCU_INSN_NAME);
    mcu_program_step step;
    mcu_program_step_fields(f, &insn, 0, 0, &step);
    MCU_REQUIRE(!f->bad && n_ops == 0 && n_params == 2, MCU_ERR_PROGRAM_INVALID);
    *count = mcu_fb_u32(f, pv);
    *body = mcu_fb_u32(f, pv + 4u);
    MCU_REQUIRE(!f->bad && *count >= 1 && *count <= MCU_PROGRAM_MAX_ITERATIONS && *body >= 1 && *body <= left,
                MCU_ERR_PROGRAM_INVALID);
    return MCU_OK;
}

/* Every element of the u32 vector field `slot` is the id of an arena tensor (or, with `streamed`, a streamed
 * input); returns the count. */
static uint32_t verify_io(mcu_fb *f, const mcu_fbt *m, uint32_t slot, uint32_t n_tensors, int streamed)
{
    uint32_t n;
    mcu_fb_vector(f, m, slot, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t id = mcu_fb_u32_at(f, m, slot, i);
        mcu_fbt t;
        mcu_program_tensor_desc d;
        mcu_program_tensor(f, m, id < n_tensors ? id : n_tensors, &t, &d);
        if (d.placement != MCU_PLACEMENT_ARENA && !(streamed && d.placement == MCU_PLACEMENT_STREAMED)) {
            f->bad = 1;
        }
    }
    return n;
}

/* Bundled vectors: one segment per input and output, each exactly that tensor's size. */
static mcu_status verify_bundled(mcu_fb *f, const mcu_program *q, uint32_t method, uint32_t vector,
                                 const uint32_t *n_io)
{
    for (uint32_t expected = 0; expected < 2; ++expected) {
        mcu_fbt m, b;
        mcu_program_method_table(f, q, method, &m);
        mcu_fb_table_at(f, &m, MCU_METHOD_BUNDLED, vector, &b);
        uint32_t n, n_tol;
        mcu_fb_vector(f, &b, expected ? MCU_BUNDLED_EXPECTED : MCU_BUNDLED_INPUTS, 4, &n);
        mcu_fb_vector(f, &b, MCU_BUNDLED_TOLERANCES, 4, &n_tol);
        MCU_REQUIRE(!f->bad && n == n_io[expected] && (n_tol == 0 || n_tol == n_io[1]), MCU_ERR_PROGRAM_INVALID);
        for (uint32_t i = 0; i < n; ++i) {
            const uint8_t *data;
            uint32_t size;
            float tol;
            mcu_program_tensor_info info;
            MCU_CHECK(mcu_program_bundled(q, method, vector, expected, i, &data, &size, &tol));
            MCU_CHECK(mcu_program_io(q, method, expected, i, &info));
            MCU_REQUIRE(size == info.nbytes, MCU_ERR_PROGRAM_INVALID);
        }
    }
    return MCU_OK;
}

static mcu_status verify_method(mcu_fb *f, const mcu_program *q, uint32_t index, uint32_t n_program_delegates,
                                uint32_t arena_limit)
{
    mcu_fbt m, other;
    mcu_program_method_table(f, q, index, &m);
    const char *name = mcu_fb_string(f, &m, MCU_METHOD_NAME);
    MCU_REQUIRE(!f->bad && name[0] != '\0', MCU_ERR_PROGRAM_INVALID);
    for (uint32_t j = 0; j < index; ++j) {
        mcu_program_method_table(f, q, j, &other);
        MCU_REQUIRE(!mcu_program_streq(name, mcu_fb_string(f, &other, MCU_METHOD_NAME)), MCU_ERR_PROGRAM_INVALID);
    }
    uint32_t n_arenas, n_tensors, n;
    const uint32_t av = mcu_fb_vector(f, &m, MCU_METHOD_ARENA_SIZES, 4, &n_arenas);
    MCU_REQUIRE(n_arenas <= MCU_PROGRAM_MAX_ARENAS, MCU_ERR_PROGRAM_INVALID);
    uint32_t arenas[MCU_PROGRAM_MAX_ARENAS];
    uint64_t arena_total = 0;
    for (uint32_t i = 0; i < n_arenas; ++i) {
        arenas[i] = mcu_fb_u32(f, av + 4u * i);
        MCU_REQUIRE(arenas[i] <= INT32_MAX, MCU_ERR_PROGRAM_INVALID);
        arena_total += arenas[i];
    }
    MCU_REQUIRE(!f->bad, MCU_ERR_PROGRAM_INVALID);
    MCU_REQUIRE(arena_total <= arena_limit, MCU_ERR_ARENA_LIMIT);
    mcu_fb_vector(f, &m, MCU_METHOD_TENSORS, 4, &n_tensors);
    for (uint32_t i = 0; i < n_tensors; ++i) {
        MCU_CHECK(verify_tensor(f, q, &m, i, arenas, n_arenas));
    }
    const uint32_t n_io[2] = {verify_io(f, &m, MCU_METHOD_INPUTS, n_tensors, 1),
                              verify_io(f, &m, MCU_METHOD_OUTPUTS, n_tensors, 0)};
    MCU_REQUIRE(!f->bad, MCU_ERR_PROGRAM_INVALID);
    mcu_fb_vector(f, &m, MCU_METHOD_INSTRUCTIONS, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        mcu_fbt insn;
        mcu_fb_table_at(f, &m, MCU_METHOD_INSTRUCTIONS, i, &insn);
        MCU_REQUIRE(!f->bad, MCU_ERR_PROGRAM_INVALID);
        if (mcu_fb_scalar(f, &insn, MCU_INSN_KERNEL, 2, 0) == MCU_K_ROWS) {
            uint32_t body;
            MCU_CHECK(verify_rows(f, q, &m, i, n - i - 1u, n_tensors, n_program_delegates, arenas, &body));
            i += body;
            continue;
        }
        if (mcu_fb_scalar(f, &insn, MCU_INSN_KERNEL, 2, 0) != MCU_K_LOOP) {
            MCU_CHECK(verify_instruction(f, q, &m, i, n_tensors, n_program_delegates, arenas, 0));
            continue;
        }
        uint32_t count, body;
        MCU_CHECK(verify_loop(f, &m, i, n - i - 1u, &count, &body));
        for (uint32_t j = 1; j <= body; ++j) {
            MCU_CHECK(verify_instruction(f, q, &m, i + j, n_tensors, n_program_delegates, arenas, count));
        }
        i += body;
    }
    mcu_fb_vector(f, &m, MCU_METHOD_BUNDLED, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        MCU_CHECK(verify_bundled(f, q, index, i, n_io));
    }
    return f->bad ? MCU_ERR_PROGRAM_INVALID : MCU_OK;
}

/* The segments of one location (inline or external) lie in the order of the segments vector without
 * overlapping, and every byte of its data region outside them (alignment padding, a tail) is zero: no byte
 * of a file escapes verification, whether or not a CRC covers it. */
static mcu_status verify_padding(mcu_fb *f, const mcu_program *q, const mcu_fbt *root, uint32_t location,
                                 const uint8_t *base, uint32_t size)
{
    uint32_t n, cursor = 0;
    const uint32_t vector = mcu_fb_vector(f, root, MCU_PROGRAM_SEGMENTS, 4, &n);
    for (uint32_t i = 0; i <= n; ++i) {
        uint32_t start = size, end = size;
        if (i < n) {
            mcu_fbt s;
            const uint8_t *data;
            uint32_t seg_size;
            mcu_fb_elem(f, vector, n, i, &s);
            if (mcu_fb_scalar(f, &s, MCU_SEGMENT_LOCATION, 1, 0) != location) {
                continue;
            }
            MCU_CHECK(mcu_program_segment_in(f, q, vector, n, i, &data, &seg_size));
            start = (uint32_t)(data - base);
            end = start + seg_size;
        }
        MCU_REQUIRE(!f->bad && start >= cursor, MCU_ERR_PROGRAM_INVALID);
        for (uint32_t k = cursor; k < start; ++k) {
            MCU_REQUIRE(base[k] == 0, MCU_ERR_PROGRAM_INVALID);
        }
        cursor = end;
    }
    return MCU_OK;
}

/* The payload of program delegate `i` and the backend registered for it (NULL if none). */
static const mcu_delegate_backend *delegate_at(mcu_fb *f, const mcu_program *q, uint32_t i, const uint8_t **data,
                                       uint32_t *size, mcu_status *status)
{
    mcu_fbt root, d;
    mcu_fb_table(f, q->root, &root);
    mcu_fb_table_at(f, &root, MCU_PROGRAM_DELEGATES, i, &d);
    *status = mcu_program_segment(f, q, mcu_fb_scalar(f, &d, MCU_DELEGATE_SEGMENT, 4, 0), data, size);
    return find_backend(q, mcu_fb_string(f, &d, MCU_DELEGATE_BACKEND));
}

mcu_status mcu_program_load(mcu_program *program, const void *buffer, uint32_t size,
                            const mcu_program_options *options)
{
    MCU_REQUIRE(program != NULL && buffer != NULL, MCU_ERR_NULL_POINTER);
    memset(program, 0, sizeof(*program));
    const mcu_program_options none = {NULL, 0, NULL, 0, 0, NULL, 0, 0};
    const mcu_program_options *opt = options != NULL ? options : &none;
    const uint8_t *b = (const uint8_t *)buffer;
    MCU_REQUIRE(((uintptr_t)b % MCU_PROGRAM_ALIGN) == 0, MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(opt->n_delegates == 0 || opt->delegates != NULL, MCU_ERR_NULL_POINTER);
    mcu_file_header h;
    MCU_CHECK(read_header(b, size, "MCUP", &h, opt->flags, MCU_HEADER_EXTERNAL_WEIGHTS, MCU_ERR_PROGRAM_CHECKSUM));

    mcu_program q;
    memset(&q, 0, sizeof(q));
    q.fb = b + MCU_PROGRAM_HEADER_SIZE;
    q.fb_size = h.fb_size;
    q.data = b + h.data_offset;
    q.data_size = h.data_size;
    q.delegates = opt->delegates;
    q.n_delegates = opt->n_delegates;
    q.delegate_handles = opt->delegate_handles;
    mcu_fb f = {q.fb, q.fb_size, 0};
    mcu_fbt root, ext;
    MCU_REQUIRE(h.fb_size >= 8 && memcmp(q.fb + 4, "MCUP", 4) == 0, MCU_ERR_PROGRAM_INVALID);
    q.root = mcu_fb_table(&f, mcu_fb_u32(&f, 0), &root);
    const uint32_t version = mcu_fb_scalar(&f, &root, MCU_PROGRAM_VERSION_FIELD, 4, 0);
    (void)mcu_fb_string(&f, &root, MCU_PROGRAM_PRODUCER);
    MCU_REQUIRE(!f.bad, MCU_ERR_PROGRAM_INVALID);
    MCU_REQUIRE(version == MCU_PROGRAM_FORMAT_VERSION, MCU_ERR_PROGRAM_VERSION);

    const uint32_t has_ext = mcu_fb_child(&f, &root, MCU_PROGRAM_EXTERNAL, &ext);
    MCU_REQUIRE(!f.bad && (has_ext != 0) == ((h.flags & MCU_HEADER_EXTERNAL_WEIGHTS) != 0), MCU_ERR_PROGRAM_INVALID);
    if (has_ext != 0) {
        uint32_t n_id;
        const uint32_t id = mcu_fb_vector(&f, &ext, MCU_WEIGHTS_CONTENT_ID, 1, &n_id);
        const uint32_t ext_size = mcu_fb_scalar(&f, &ext, MCU_WEIGHTS_SIZE, 4, 0);
        (void)mcu_fb_string(&f, &ext, MCU_WEIGHTS_FILE_NAME);
        MCU_REQUIRE(!f.bad && n_id == 16, MCU_ERR_PROGRAM_INVALID);
        MCU_REQUIRE(opt->weights != NULL, MCU_ERR_WEIGHTS_MISMATCH);
        const uint8_t *wb = (const uint8_t *)opt->weights;
        MCU_REQUIRE(((uintptr_t)wb % MCU_PROGRAM_ALIGN) == 0, MCU_ERR_INVALID_ARG);
        mcu_file_header wh;
        /* A file that is no weights file of this format is a mismatch; its own CRC failing, corrupt weights. */
        const mcu_status ws = read_header(wb, opt->weights_size, "MCUW", &wh, opt->flags, 0u, MCU_ERR_WEIGHTS_CORRUPT);
        MCU_REQUIRE(ws == MCU_OK || ws == MCU_ERR_WEIGHTS_CORRUPT, MCU_ERR_WEIGHTS_MISMATCH);
        MCU_CHECK(ws);
        MCU_REQUIRE(memcmp(q.fb + id, wh.content_id, 16) == 0 && ext_size == wh.data_size, MCU_ERR_WEIGHTS_MISMATCH);
        q.weights = wb + wh.data_offset;
        q.weights_size = wh.data_size;
    }

    uint32_t n, n_program_delegates;
    const uint8_t *data;
    uint32_t seg_size;
    mcu_fb_vector(&f, &root, MCU_PROGRAM_SEGMENTS, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        mcu_fbt s;
        MCU_CHECK(mcu_program_segment(&f, &q, i, &data, &seg_size));
        mcu_fb_table_at(&f, &root, MCU_PROGRAM_SEGMENTS, i, &s);
        (void)mcu_fb_string(&f, &s, MCU_SEGMENT_NAME);
        MCU_REQUIRE(!f.bad, MCU_ERR_PROGRAM_INVALID);
        /* The weights header's content id only names the file; this checks its bytes. */
        const int external = mcu_fb_scalar(&f, &s, MCU_SEGMENT_LOCATION, 1, 0) == MCU_SEGMENT_EXTERNAL;
        if (external && (opt->flags & MCU_PROGRAM_SKIP_CHECKSUM) == 0) {
            MCU_REQUIRE(crc32_update(0, data, seg_size) == mcu_fb_scalar(&f, &s, MCU_SEGMENT_CRC, 4, 0),
                        MCU_ERR_WEIGHTS_CORRUPT);
        }
    }
    MCU_CHECK(verify_padding(&f, &q, &root, MCU_SEGMENT_INLINE, q.data, q.data_size));
    if (q.weights != NULL) {
        MCU_CHECK(verify_padding(&f, &q, &root, MCU_SEGMENT_EXTERNAL, q.weights, q.weights_size));
    }
    mcu_fb_vector(&f, &root, MCU_PROGRAM_DELEGATES, 4, &n_program_delegates);
    for (uint32_t i = 0; i < n_program_delegates; ++i) {
        mcu_status status;
        const mcu_delegate_backend *backend = delegate_at(&f, &q, i, &data, &seg_size, &status);
        MCU_CHECK(status);
        MCU_REQUIRE(!f.bad, MCU_ERR_PROGRAM_INVALID);
        MCU_REQUIRE(backend != NULL, MCU_ERR_UNSUPPORTED);
    }
    MCU_REQUIRE(n_program_delegates <= opt->n_delegate_handles, MCU_ERR_BUFFER_TOO_SMALL);
    MCU_REQUIRE(n_program_delegates == 0 || opt->delegate_handles != NULL, MCU_ERR_NULL_POINTER);

    mcu_fb_vector(&f, &root, MCU_PROGRAM_METHODS, 4, &q.n_methods);
    MCU_REQUIRE(!f.bad && q.n_methods >= 1 && q.n_methods <= 1024, MCU_ERR_PROGRAM_INVALID);
    const uint32_t arena_limit = opt->arena_limit != 0 ? opt->arena_limit : MCU_PROGRAM_DEFAULT_ARENA_LIMIT;
    for (uint32_t i = 0; i < q.n_methods; ++i) {
        MCU_CHECK(verify_method(&f, &q, i, n_program_delegates, arena_limit));
    }
    MCU_REQUIRE(!f.bad, MCU_ERR_PROGRAM_INVALID);

    /* Verified: each payload becomes a handle of its backend (which checks magic, version, body). */
    for (uint32_t i = 0; i < n_program_delegates; ++i) {
        q.delegate_handles[i] = NULL;
    }
    *program = q;
    for (uint32_t i = 0; i < n_program_delegates; ++i) {
        mcu_status status;
        const mcu_delegate_backend *backend = delegate_at(&f, &q, i, &data, &seg_size, &status);
        status = mcu_delegate_init(backend, data, seg_size, NULL, 0, &q.delegate_handles[i]);
        if (status != MCU_OK) {
            mcu_program_unload(program);
            return status;
        }
    }
    return MCU_OK;
}

void mcu_program_unload(mcu_program *program)
{
    if (program == NULL || program->fb == NULL) {
        return;
    }
    mcu_fb f;
    mcu_fbt root;
    mcu_program_reader(program, &f, &root);
    uint32_t n;
    mcu_fb_vector(&f, &root, MCU_PROGRAM_DELEGATES, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t *data;
        uint32_t size;
        mcu_status status;
        const mcu_delegate_backend *backend = delegate_at(&f, program, i, &data, &size, &status);
        if (program->delegate_handles != NULL) {
            mcu_delegate_destroy(backend, &program->delegate_handles[i]);
        }
    }
    memset(program, 0, sizeof(*program));
}
