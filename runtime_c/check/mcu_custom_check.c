/*
 * The host check of a user's custom kernels (mcu/custom_check.py): a child
 * process, built with ASan and UBSan where the compiler has them, that runs
 * each planned call once on buffers of exactly the planned sizes with a
 * guard zone before and after each. Under ASan the guards are poisoned, so
 * the first stray access aborts with its address; the map of buffers printed
 * before each call lets the parent name the tensor and the byte offset.
 * Without ASan the guards hold a pattern that is checked after the call.
 * The inputs and the params are compared with copies after each call too.
 *
 * Request file (little-endian u32 words unless noted):
 *   "MCUQ" n_calls, then per call: kernel index, params size, params bytes,
 *   n_inputs, per input (size, bytes), output size, scratch size.
 * Result file: per call, the kernel's status (i32) then the output bytes.
 * Lines on stderr: MCU_CALL <call>, MCU_BUF <call> <name> <address> <size>,
 * and on a guard found changed without ASan: MCU_GUARD <call> <name> <offset>.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcu/custom.h"

#if defined(__SANITIZE_ADDRESS__)
#define MCU_CHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MCU_CHECK_ASAN 1
#endif
#endif

#ifdef MCU_CHECK_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#define POISON(p, n) __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GUARD 4096u
#define PATTERN 0xA5u
#define MAX_BUFFERS (MCU_CUSTOM_MAX_INPUTS + 3)

extern const mcu_custom_fn mcu_check_kernels[];
extern const uint32_t mcu_check_n_kernels;

typedef struct {
    char name[16];
    uint8_t *block; /* guard, data, guard */
    uint8_t *data;
    uint8_t *copy; /* the bytes before the call, for buffers the kernel must not change */
    uint32_t size;
} buffer;

static int fail(const char *what)
{
    fprintf(stderr, "MCU_CHECK_ERROR %s\n", what);
    return 4;
}

static int read_u32(FILE *f, uint32_t *v)
{
    uint8_t b[4];
    if (fread(b, 1, 4, f) != 4) {
        return 0;
    }
    *v = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    return 1;
}

static int make(buffer *b, const char *name, uint32_t size, FILE *f, int keep_copy)
{
    snprintf(b->name, sizeof(b->name), "%s", name);
    b->size = size;
    b->block = malloc((size_t)size + 2u * GUARD);
    b->copy = keep_copy ? malloc((size_t)size + 1u) : NULL;
    if (b->block == NULL || (keep_copy && b->copy == NULL)) {
        return 0;
    }
    b->data = b->block + GUARD;
    memset(b->block, (int)PATTERN, (size_t)size + 2u * GUARD);
    if (f != NULL && size > 0u && fread(b->data, 1, size, f) != size) {
        return 0;
    }
    if (keep_copy) {
        memcpy(b->copy, b->data, size);
    }
    POISON(b->block, GUARD);
    POISON(b->data + size, GUARD);
    return 1;
}

static void release(buffer *b)
{
    UNPOISON(b->block, GUARD);
    UNPOISON(b->data + b->size, GUARD);
    free(b->block);
    free(b->copy);
}

/* The first byte that differs from what it should hold, as an offset from the data's start; 1 if any. */
static int changed(const buffer *b, long *offset)
{
    for (uint32_t i = 0; i < GUARD; ++i) {
        if (b->block[i] != PATTERN) {
            *offset = (long)i - (long)GUARD;
            return 1;
        }
    }
    if (b->copy != NULL) {
        for (uint32_t i = 0; i < b->size; ++i) {
            if (b->data[i] != b->copy[i]) {
                *offset = (long)i;
                return 1;
            }
        }
    }
    for (uint32_t i = 0; i < GUARD; ++i) {
        if (b->data[b->size + i] != PATTERN) {
            *offset = (long)b->size + (long)i;
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        return fail("usage: check REQUEST RESULT");
    }
    FILE *in = fopen(argv[1], "rb");
    FILE *out = fopen(argv[2], "wb");
    uint8_t magic[4];
    uint32_t n_calls = 0;
    if (in == NULL || out == NULL || fread(magic, 1, 4, in) != 4 || memcmp(magic, "MCUQ", 4) != 0 ||
        !read_u32(in, &n_calls)) {
        return fail("bad request");
    }
    for (uint32_t c = 0; c < n_calls; ++c) {
        buffer bufs[MAX_BUFFERS];
        uint32_t n_bufs = 0;
        uint32_t kernel = 0, size = 0, n_inputs = 0;
        if (!read_u32(in, &kernel) || kernel >= mcu_check_n_kernels || !read_u32(in, &size) ||
            size != sizeof(mcu_custom_params) || !make(&bufs[n_bufs++], "params", size, in, 1) ||
            !read_u32(in, &n_inputs) || n_inputs > MCU_CUSTOM_MAX_INPUTS) {
            return fail("bad call");
        }
        const void *inputs[MCU_CUSTOM_MAX_INPUTS + 1] = {NULL};
        for (uint32_t i = 0; i < n_inputs; ++i) {
            char name[16];
            snprintf(name, sizeof(name), "input%u", (unsigned)i);
            if (!read_u32(in, &size) || !make(&bufs[n_bufs], name, size, in, 1)) {
                return fail("bad input");
            }
            inputs[i] = bufs[n_bufs++].data;
        }
        uint32_t out_size = 0, scratch_size = 0;
        if (!read_u32(in, &out_size) || !read_u32(in, &scratch_size)) {
            return fail("bad sizes");
        }
        buffer *output = &bufs[n_bufs];
        if (!make(&bufs[n_bufs++], "output", out_size, NULL, 0)) {
            return fail("out of memory");
        }
        memset(output->data, 0, out_size);
        buffer *scratch = NULL;
        if (scratch_size > 0u) {
            scratch = &bufs[n_bufs];
            if (!make(&bufs[n_bufs++], "scratch", scratch_size, NULL, 0)) {
                return fail("out of memory");
            }
        }
        buffer *list = &bufs[n_bufs];
        if (!make(&bufs[n_bufs++], "inputs", (uint32_t)(n_inputs * sizeof(void *)), NULL, 0)) {
            return fail("out of memory");
        }
        memcpy(list->data, inputs, n_inputs * sizeof(void *));
        if (list->copy == NULL) {
            list->copy = malloc((size_t)list->size + 1u);
            if (list->copy == NULL) {
                return fail("out of memory");
            }
            memcpy(list->copy, list->data, list->size);
        }
        fprintf(stderr, "MCU_CALL %u\n", (unsigned)c);
        for (uint32_t b = 0; b < n_bufs; ++b) {
            fprintf(stderr, "MCU_BUF %u %s %p %u\n", (unsigned)c, bufs[b].name, (void *)bufs[b].data,
                    (unsigned)bufs[b].size);
        }
        fflush(stderr);
        const mcu_custom_call call = {(const mcu_custom_params *)bufs[0].data, (const void *const *)list->data,
                                      output->data, scratch != NULL ? scratch->data : NULL, (int32_t)scratch_size};
        const int32_t status = (int32_t)mcu_check_kernels[kernel](&call);
        for (uint32_t b = 0; b < n_bufs; ++b) {
            long offset = 0;
            UNPOISON(bufs[b].block, GUARD);
            UNPOISON(bufs[b].data + bufs[b].size, GUARD);
            if (changed(&bufs[b], &offset)) {
                fprintf(stderr, "MCU_GUARD %u %s %ld\n", (unsigned)c, bufs[b].name, offset);
                return 3;
            }
        }
        uint8_t st[4] = {(uint8_t)status, (uint8_t)((uint32_t)status >> 8), (uint8_t)((uint32_t)status >> 16),
                         (uint8_t)((uint32_t)status >> 24)};
        if (fwrite(st, 1, 4, out) != 4 || fwrite(output->data, 1, out_size, out) != out_size) {
            return fail("cannot write the result");
        }
        for (uint32_t b = 0; b < n_bufs; ++b) {
            release(&bufs[b]);
        }
    }
    fclose(in);
    return fclose(out) == 0 ? 0 : fail("cannot write the result");
}
