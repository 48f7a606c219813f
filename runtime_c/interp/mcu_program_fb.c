/* Bounds-checked flatbuffer reading (see mcu_program_internal.h). */
#include <string.h>

#include "mcu_program_internal.h"

static uint32_t fail(mcu_fb *f)
{
    f->bad = 1;
    return 0;
}

/* `width` bytes at `pos`, zero-extended; 0 and bad when out of bounds. */
static uint32_t load(mcu_fb *f, uint64_t pos, uint32_t width)
{
    if (pos + width > f->n) {
        return fail(f);
    }
    uint32_t v = 0;
    memcpy(&v, f->b + pos, width);
    return v;
}

uint32_t mcu_fb_u32(mcu_fb *f, uint64_t pos)
{
    return load(f, pos, 4);
}

uint32_t mcu_fb_table(mcu_fb *f, uint64_t pos)
{
    if (pos == 0 || (pos & 3u) != 0 || pos + 4 > f->n) {
        return fail(f);
    }
    const int64_t vt = (int64_t)pos - (int32_t)load(f, pos, 4);
    if (vt < 4 || (vt & 1) != 0 || (uint64_t)vt + 4 > f->n) {
        return fail(f);
    }
    const uint32_t vt_size = load(f, (uint64_t)vt, 2);
    const uint32_t t_size = load(f, (uint64_t)vt + 2, 2);
    if (vt_size < 4 || (vt_size & 1u) != 0 || (uint64_t)vt + vt_size > f->n || t_size < 4 ||
        pos + t_size > f->n) {
        return fail(f);
    }
    return (uint32_t)pos;
}

uint32_t mcu_fb_field(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t width)
{
    if (table == 0) {
        return 0;
    }
    const int64_t vt = (int64_t)table - (int32_t)load(f, table, 4);
    if (vt < 0) {
        return fail(f);
    }
    const uint32_t vt_size = load(f, (uint64_t)vt, 2);
    if (4u + 2u * slot + 2u > vt_size) {
        return 0;
    }
    const uint32_t voff = load(f, (uint64_t)vt + 4u + 2u * slot, 2);
    if (voff == 0) {
        return 0;
    }
    if (voff < 4u || voff + width > load(f, (uint64_t)vt + 2, 2)) {
        return fail(f);
    }
    return table + voff;
}

uint32_t mcu_fb_scalar(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t width, uint32_t dflt)
{
    const uint32_t pos = mcu_fb_field(f, table, slot, width);
    return pos == 0 ? dflt : load(f, pos, width);
}

/* The object an offset field at `pos` points to. */
static uint64_t follow(mcu_fb *f, uint32_t pos)
{
    return (uint64_t)pos + load(f, pos, 4);
}

uint32_t mcu_fb_vector(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t elem_size, uint32_t *count)
{
    *count = 0;
    const uint32_t pos = mcu_fb_field(f, table, slot, 4);
    if (pos == 0) {
        return 0;
    }
    const uint64_t v = follow(f, pos);
    if ((v & 3u) != 0 || v + 4 > f->n) {
        return fail(f);
    }
    const uint32_t n = load(f, v, 4);
    if ((uint64_t)n * elem_size > f->n - v - 4) {
        return fail(f);
    }
    *count = n;
    return (uint32_t)v + 4u;
}

uint32_t mcu_fb_child(mcu_fb *f, uint32_t table, uint32_t slot)
{
    const uint32_t pos = mcu_fb_field(f, table, slot, 4);
    return pos == 0 ? 0 : mcu_fb_table(f, follow(f, pos));
}

uint32_t mcu_fb_elem_table(mcu_fb *f, uint32_t vector, uint32_t i)
{
    return mcu_fb_table(f, follow(f, vector + 4u * i));
}

const char *mcu_fb_string(mcu_fb *f, uint32_t table, uint32_t slot)
{
    uint32_t n;
    const uint32_t s = mcu_fb_vector(f, table, slot, 1, &n);
    if (s == 0 || (uint64_t)s + n >= f->n || f->b[s + n] != 0) {
        if (s != 0) {
            fail(f);
        }
        return "";
    }
    return (const char *)(f->b + s);
}

uint32_t mcu_fb_table_at(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t i)
{
    uint32_t n;
    const uint32_t v = mcu_fb_vector(f, table, slot, 4, &n);
    return i < n ? mcu_fb_elem_table(f, v, i) : fail(f);
}

uint32_t mcu_fb_u32_at(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t i)
{
    uint32_t n;
    const uint32_t v = mcu_fb_vector(f, table, slot, 4, &n);
    return i < n ? load(f, (uint64_t)v + 4u * i, 4) : MCU_FB_ABSENT_INDEX;
}

void mcu_program_reader(const mcu_program *p, mcu_fb *f)
{
    f->b = p->fb;
    f->n = p->fb_size;
    f->bad = 0;
}

uint32_t mcu_program_method_table(mcu_fb *f, const mcu_program *p, uint32_t method)
{
    return method < p->n_methods ? mcu_fb_table_at(f, p->root, MCU_PROGRAM_METHODS, method) : 0;
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
    static const uint8_t sizes[] = {4, 1, 2, 4, 1};
    return dtype < sizeof(sizes) ? sizes[dtype] : 0u;
}
