/* Bounds-checked flatbuffer reading (see mcu_program_internal.h). */
#include <string.h>

#include "mcu_program_internal.h"

static uint32_t fail(mcu_fb *f)
{
    f->bad = 1;
    return 0;
}

/* [pos, pos + len) inside the buffer, for any 32-bit pos and len (the buffer is below 2 GiB). */
static int in(const mcu_fb *f, uint32_t pos, uint32_t len)
{
    return pos <= f->n && len <= f->n - pos;
}

/* `width` (1, 2 or 4) bytes at `pos`, zero-extended; 0 and bad when out of bounds. */
static uint32_t load(mcu_fb *f, uint32_t pos, uint32_t width)
{
    if (!in(f, pos, width)) {
        return fail(f);
    }
    /* Constant-size copies: single loads, no call to memcpy. */
    const uint8_t *p = f->b + pos;
    if (width == 4u) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    if (width == 2u) {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    return p[0];
}

uint32_t mcu_fb_u32(mcu_fb *f, uint32_t pos)
{
    return load(f, pos, 4);
}

uint32_t mcu_fb_table(mcu_fb *f, uint32_t pos, mcu_fbt *t)
{
    memset(t, 0, sizeof(*t));
    if (pos == 0 || (pos & 3u) != 0 || !in(f, pos, 4)) {
        return fail(f);
    }
    /* pos < 2^31, so pos - soffset neither wraps into the buffer nor overflows. */
    const uint32_t vt = pos - load(f, pos, 4);
    if ((vt & 1u) != 0 || vt < 4u || !in(f, vt, 4)) {
        return fail(f);
    }
    const uint32_t vt_size = load(f, vt, 2);
    const uint32_t t_size = load(f, vt + 2u, 2);
    if (vt_size < 4u || (vt_size & 1u) != 0 || !in(f, vt, vt_size) || t_size < 4u || !in(f, pos, t_size)) {
        return fail(f);
    }
    t->pos = pos;
    t->vt = vt;
    t->vt_size = vt_size;
    t->t_size = t_size;
    return pos;
}

uint32_t mcu_fb_field(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t width)
{
    if (4u + 2u * slot + 2u > t->vt_size) {
        return 0; /* absent (or an absent table, whose vt_size is 0) */
    }
    const uint32_t voff = load(f, t->vt + 4u + 2u * slot, 2);
    if (voff == 0) {
        return 0;
    }
    if (voff < 4u || voff + width > t->t_size) {
        return fail(f);
    }
    return t->pos + voff;
}

uint32_t mcu_fb_scalar(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t width, uint32_t dflt)
{
    const uint32_t pos = mcu_fb_field(f, t, slot, width);
    return pos == 0 ? dflt : load(f, pos, width);
}

/* The object an offset field at `pos` points to (0 and bad past the end). */
static uint32_t follow(mcu_fb *f, uint32_t pos)
{
    const uint32_t off = load(f, pos, 4);
    return in(f, pos, off) ? pos + off : fail(f);
}

uint32_t mcu_fb_vector(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t elem_size, uint32_t *count)
{
    *count = 0;
    const uint32_t pos = mcu_fb_field(f, t, slot, 4);
    if (pos == 0) {
        return 0;
    }
    const uint32_t v = follow(f, pos);
    if (v == 0 || (v & 3u) != 0 || !in(f, v, 4)) {
        return fail(f);
    }
    const uint32_t n = load(f, v, 4);
    if (n > (f->n - v - 4u) / elem_size) {
        return fail(f);
    }
    *count = n;
    return v + 4u;
}

uint32_t mcu_fb_child(mcu_fb *f, const mcu_fbt *t, uint32_t slot, mcu_fbt *child)
{
    const uint32_t pos = mcu_fb_field(f, t, slot, 4);
    if (pos == 0) {
        memset(child, 0, sizeof(*child));
        return 0;
    }
    return mcu_fb_table(f, follow(f, pos), child);
}

uint32_t mcu_fb_elem(mcu_fb *f, uint32_t vector, uint32_t count, uint32_t i, mcu_fbt *out)
{
    if (i >= count) {
        memset(out, 0, sizeof(*out));
        return fail(f);
    }
    return mcu_fb_table(f, follow(f, vector + 4u * i), out);
}

uint32_t mcu_fb_table_at(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t i, mcu_fbt *out)
{
    uint32_t n;
    const uint32_t v = mcu_fb_vector(f, t, slot, 4, &n);
    return mcu_fb_elem(f, v, n, i, out);
}

/* Well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
 * above U+10FFFF), so that every name decodes wherever it is shown. */
static int utf8_valid(const uint8_t *s, uint32_t n)
{
    uint32_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        uint32_t len;
        uint8_t lo = 0x80u, hi = 0xBFu; /* the range of the second byte */
        if (c < 0x80u) {
            ++i;
            continue;
        } else if (c >= 0xC2u && c <= 0xDFu) {
            len = 2;
        } else if (c >= 0xE0u && c <= 0xEFu) {
            len = 3;
            lo = c == 0xE0u ? 0xA0u : 0x80u;
            hi = c == 0xEDu ? 0x9Fu : 0xBFu;
        } else if (c >= 0xF0u && c <= 0xF4u) {
            len = 4;
            lo = c == 0xF0u ? 0x90u : 0x80u;
            hi = c == 0xF4u ? 0x8Fu : 0xBFu;
        } else {
            return 0;
        }
        if (len > n - i || s[i + 1] < lo || s[i + 1] > hi) {
            return 0;
        }
        for (uint32_t k = 2; k < len; ++k) {
            if ((s[i + k] & 0xC0u) != 0x80u) {
                return 0;
            }
        }
        i += len;
    }
    return 1;
}

const char *mcu_fb_string(mcu_fb *f, const mcu_fbt *t, uint32_t slot)
{
    uint32_t n;
    const uint32_t s = mcu_fb_vector(f, t, slot, 1, &n);
    if (s == 0) {
        return "";
    }
    if (!in(f, s, n + 1u) || f->b[s + n] != 0 || !utf8_valid(f->b + s, n)) {
        fail(f);
        return "";
    }
    return (const char *)(f->b + s);
}

uint32_t mcu_fb_u32_at(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t i)
{
    uint32_t n;
    const uint32_t v = mcu_fb_vector(f, t, slot, 4, &n);
    return i < n ? load(f, v + 4u * i, 4) : MCU_FB_ABSENT_INDEX;
}

void mcu_program_step_fields(mcu_fb *f, const mcu_fbt *insn, uint32_t n_ops, uint32_t count, mcu_program_step *s)
{
    uint32_t n_strides, n_iterations;
    const uint32_t sv = mcu_fb_vector(f, insn, MCU_INSN_STRIDES, 4, &n_strides);
    const uint32_t iv = mcu_fb_vector(f, insn, MCU_INSN_ITERATIONS, 4, &n_iterations);
    s->first = 0;
    s->end = count != 0 ? count : 1u;
    for (uint32_t k = 0; k < MCU_PROGRAM_MAX_OPERANDS; ++k) {
        s->strides[k] = 0;
    }
    if (count == 0) {
        if (n_strides != 0 || n_iterations != 0) {
            f->bad = 1;
        }
        return;
    }
    if (n_strides != 0) {
        if (n_strides != n_ops || n_ops > MCU_PROGRAM_MAX_OPERANDS) {
            f->bad = 1;
            return;
        }
        for (uint32_t k = 0; k < n_ops; ++k) {
            s->strides[k] = (int32_t)load(f, sv + 4u * k, 4);
        }
    }
    if (n_iterations != 0) {
        s->first = load(f, iv, 4);
        s->end = load(f, iv + 4u, 4);
        if (n_iterations != 2 || s->first >= s->end || s->end > count) {
            f->bad = 1;
        }
    }
}

void mcu_program_reader(const mcu_program *p, mcu_fb *f, mcu_fbt *root)
{
    f->b = p->fb;
    f->n = p->fb_size;
    f->bad = 0;
    mcu_fb_table(f, p->root, root);
}

uint32_t mcu_program_method_table(mcu_fb *f, const mcu_program *p, uint32_t method, mcu_fbt *m)
{
    mcu_fbt root;
    mcu_fb_table(f, p->root, &root);
    if (method >= p->n_methods) {
        memset(m, 0, sizeof(*m));
        return 0;
    }
    return mcu_fb_table_at(f, &root, MCU_PROGRAM_METHODS, method, m);
}

void mcu_program_tensor(mcu_fb *f, const mcu_fbt *method, uint32_t id, mcu_fbt *t, mcu_program_tensor_desc *d)
{
    mcu_fb_table_at(f, method, MCU_METHOD_TENSORS, id, t);
    mcu_program_tensor_fields(f, t, d);
}

void mcu_program_tensor_fields(mcu_fb *f, const mcu_fbt *t, mcu_program_tensor_desc *d)
{
    d->dtype = mcu_fb_scalar(f, t, MCU_TENSOR_DTYPE, 1, 0);
    d->placement = mcu_fb_scalar(f, t, MCU_TENSOR_PLACEMENT, 1, 0);
    d->index = mcu_fb_scalar(f, t, MCU_TENSOR_INDEX, 4, 0);
    d->offset = mcu_fb_scalar(f, t, MCU_TENSOR_OFFSET, 4, 0);
    d->nbytes = mcu_fb_scalar(f, t, MCU_TENSOR_NBYTES, 4, 0);
}

mcu_status mcu_program_segment(mcu_fb *f, const mcu_program *q, uint32_t index, const uint8_t **data,
                               uint32_t *size)
{
    mcu_fbt root;
    uint32_t n;
    mcu_fb_table(f, q->root, &root);
    const uint32_t v = mcu_fb_vector(f, &root, MCU_PROGRAM_SEGMENTS, 4, &n);
    return mcu_program_segment_in(f, q, v, n, index, data, size);
}

mcu_status mcu_program_segment_in(mcu_fb *f, const mcu_program *q, uint32_t vector, uint32_t count, uint32_t index,
                                  const uint8_t **data, uint32_t *size)
{
    mcu_fbt s;
    mcu_fb_elem(f, vector, count, index, &s);
    const uint32_t location = mcu_fb_scalar(f, &s, MCU_SEGMENT_LOCATION, 1, 0);
    const uint32_t offset = mcu_fb_scalar(f, &s, MCU_SEGMENT_OFFSET, 4, 0);
    *size = mcu_fb_scalar(f, &s, MCU_SEGMENT_SIZE, 4, 0);
    const uint8_t *base = location == MCU_SEGMENT_INLINE ? q->data : q->weights;
    const uint32_t limit = location == MCU_SEGMENT_INLINE ? q->data_size : q->weights_size;
    MCU_REQUIRE(!f->bad && location <= MCU_SEGMENT_EXTERNAL && base != NULL && offset % MCU_PROGRAM_ALIGN == 0 &&
                    offset <= limit && *size <= limit - offset,
                MCU_ERR_PROGRAM_INVALID);
    *data = base + offset;
    return MCU_OK;
}

int mcu_program_streq(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        ++a;
        ++b;
    }
    return *a == *b;
}

uint32_t mcu_dtype_size(uint32_t dtype)
{
    static const uint8_t sizes[] = {4, 1, 2, 4, 1, 8};
    return dtype < sizeof(sizes) ? sizes[dtype] : 0u;
}
