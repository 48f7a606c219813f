/* libFuzzer harness for the program loader, verifier and interpreter.
 *
 * The input is a program file, optionally followed by its external weights
 * file (the bytes after the program's declared size). Each input is loaded
 * twice: as is (the CRC-32 rejects almost every mutation) and with the
 * checksum skipped, so mutations reach the flatbuffer verifier. Whatever
 * verifies is then queried and executed on arenas of exactly the declared
 * sizes, so AddressSanitizer sees any access beyond what the verifier
 * proved. A program that loads with external weights is then loaded once
 * more with one byte of an external weights segment changed and the weights
 * file's own CRC recomputed: that must fail with MCU_ERR_WEIGHTS_CORRUPT
 * (the harness aborts otherwise, which libFuzzer reports as a crash).
 * Built by mcu/program/fuzz.py (scripts/fuzz_program) with
 * -fsanitize=fuzzer,address,undefined. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign: arenas of exact size for ASan */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../mcu_program_internal.h"
#include "mcu/program.h"

#define MAX_ARENA (1u << 20)
#define MAX_INSTRUCTIONS 512u

/* A delegate that reads its whole payload at init and copies operand 0 into the last operand.
 * Its handle is the caller's checksum word (the harness keeps no allocations). */
static uint32_t copy_sum;

static mcu_status copy_init(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle)
{
    (void)arena;
    (void)arena_size;
    for (uint32_t i = 0; i < size; ++i) {
        copy_sum += payload[i];
    }
    *handle = &copy_sum;
    return MCU_OK;
}

static mcu_status copy_execute(void *handle, void *const *operands, const uint32_t *bytes, uint32_t n_inputs,
                               uint32_t n_outputs)
{
    (void)handle;
    const uint32_t n = n_inputs + n_outputs;
    if (n_inputs >= 1 && n >= 2 && operands[0] != NULL && operands[n - 1] != NULL) {
        memmove(operands[n - 1], operands[0], bytes[0] < bytes[n - 1] ? bytes[0] : bytes[n - 1]);
    }
    return MCU_OK;
}

static void copy_destroy(void *handle)
{
    (void)handle;
}

static const mcu_delegate_backend copy_backend = {
    "fuzz.copy", {'F', 'U', 'Z', 'Z'}, 1u, copy_init, copy_execute, copy_destroy,
};

/* Program files name a custom kernel as the delegate backend "custom:<function>" with an "MCUX" payload:
 * the copy stands in for the custom_op example's kernels, so its programs load and run here. */
static const mcu_delegate_backend custom_f32_backend = {
    "custom:squareplus_f32", {'M', 'C', 'U', 'X'}, 1u, copy_init, copy_execute, copy_destroy,
};
static const mcu_delegate_backend custom_s8_backend = {
    "custom:squareplus_s8", {'M', 'C', 'U', 'X'}, 1u, copy_init, copy_execute, copy_destroy,
};

static uint8_t *aligned_copy(const uint8_t *data, size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, MCU_PROGRAM_ALIGN, size ? size : 1) != 0) {
        return NULL;
    }
    memcpy(p, data, size);
    return (uint8_t *)p;
}

static void exercise(const mcu_program *p)
{
    uint32_t index;
    (void)mcu_program_find_method(p, "forward", &index);
    for (uint32_t m = 0; m < p->n_methods; ++m) {
        mcu_program_method_info info;
        if (mcu_program_method(p, m, &info) != MCU_OK || info.n_instructions > MAX_INSTRUCTIONS) {
            continue;
        }
        mcu_program_tensor_info t;
        for (uint32_t i = 0; i < info.n_inputs; ++i) {
            (void)mcu_program_io(p, m, 0, i, &t);
        }
        for (uint32_t i = 0; i < info.n_outputs; ++i) {
            (void)mcu_program_io(p, m, 1, i, &t);
        }
        uint8_t *arenas[MCU_PROGRAM_MAX_ARENAS] = {NULL};
        uint32_t sizes[MCU_PROGRAM_MAX_ARENAS] = {0};
        int ok = 1;
        for (uint32_t a = 0; a < info.n_arenas; ++a) {
            void *mem = NULL;
            sizes[a] = info.arena_sizes[a];
            ok = ok && sizes[a] <= MAX_ARENA && posix_memalign(&mem, MCU_PROGRAM_ALIGN, sizes[a] ? sizes[a] : 1) == 0;
            arenas[a] = (uint8_t *)mem;
            if (arenas[a] != NULL) {
                memset(arenas[a], (int)(0x3Cu + a), sizes[a]);
            }
        }
        if (ok) {
            (void)mcu_program_execute(p, m, arenas, sizes, info.n_arenas);
            /* The bundled vectors through mcu_program_run, outputs into exact-size buffers. */
            for (uint32_t v = 0; v < info.n_bundled && v < 2u && info.n_inputs <= 16u && info.n_outputs <= 16u; ++v) {
                const void *ins[16];
                void *outs[16] = {NULL};
                const uint8_t *data;
                uint32_t size;
                float tol;
                for (uint32_t i = 0; i < info.n_inputs; ++i) {
                    ins[i] = mcu_program_bundled(p, m, v, 0, i, &data, &size, &tol) == MCU_OK ? data : NULL;
                }
                for (uint32_t i = 0; i < info.n_outputs; ++i) {
                    outs[i] = mcu_program_io(p, m, 1, i, &t) == MCU_OK ? malloc(t.nbytes ? t.nbytes : 1) : NULL;
                    (void)mcu_program_bundled(p, m, v, 1, i, &data, &size, &tol);
                }
                (void)mcu_program_run(p, m, arenas, sizes, info.n_arenas, ins, outs);
                for (uint32_t i = 0; i < info.n_outputs; ++i) {
                    free(outs[i]);
                }
            }
        }
        for (uint32_t a = 0; a < info.n_arenas; ++a) {
            free(arenas[a]);
        }
    }
}

/* CRC-32 (IEEE, reflected), bit by bit: independent of the loader's table. */
static uint32_t crc32_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; ++i) {
        crc ^= p[i];
        for (int k = 0; k < 8; ++k) {
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

/* The weights-integrity mutation: change one byte (chosen by `pick`) of the
 * first non-empty external segment, make the weights header's CRC consistent,
 * and require the load to fail with MCU_ERR_WEIGHTS_CORRUPT. */
static void check_weights_corruption(const mcu_program *p, const uint8_t *program, uint32_t program_size,
                                     const mcu_program_options *loaded_with, uint32_t pick)
{
    mcu_fb f;
    mcu_fbt root;
    mcu_program_reader(p, &f, &root);
    uint32_t n;
    mcu_fb_vector(&f, &root, MCU_PROGRAM_SEGMENTS, 4, &n);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t *data;
        uint32_t seg_size;
        if (mcu_program_segment(&f, p, i, &data, &seg_size) != MCU_OK || seg_size == 0 || data < p->weights ||
            data >= p->weights + p->weights_size) {
            continue;
        }
        const uint8_t *weights = (const uint8_t *)loaded_with->weights;
        const uint32_t weights_size = loaded_with->weights_size;
        uint8_t *copy = aligned_copy(weights, weights_size);
        if (copy == NULL) {
            return;
        }
        copy[(size_t)(data - weights) + pick % seg_size] ^= (uint8_t)(1u + pick % 255u);
        const uint32_t crc = crc32_bitwise(crc32_bitwise(0, copy, 60), copy + 64, weights_size - 64u);
        memcpy(copy + 60, &crc, 4);
        mcu_program_options options = *loaded_with;
        options.weights = copy;
        mcu_program q;
        const mcu_status status = mcu_program_load(&q, program, program_size, &options);
        free(copy);
        if (status != MCU_ERR_WEIGHTS_CORRUPT) {
            abort(); /* a changed weight byte got past the load */
        }
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (16u << 20)) {
        return 0;
    }
    const mcu_delegate_backend *const delegates[3] = {&copy_backend, &custom_f32_backend, &custom_s8_backend};
    void *handles[8];
    uint32_t program_size = (uint32_t)size;
    uint32_t declared = 0;
    uint8_t *weights = NULL;
    uint32_t weights_size = 0;
    if (mcu_program_declared_size(data, (uint32_t)size, &declared) == MCU_OK && declared >= 64u && declared < size) {
        program_size = declared;
        weights_size = (uint32_t)(size - declared);
        weights = aligned_copy(data + declared, weights_size);
    }
    uint8_t *program = aligned_copy(data, program_size);
    if (program != NULL) {
        for (uint32_t flags = 0; flags <= MCU_PROGRAM_SKIP_CHECKSUM; ++flags) {
            const mcu_program_options options = {weights, weights_size, delegates, 3, flags, handles, 8, MAX_ARENA};
            mcu_program p;
            if (mcu_program_load(&p, program, program_size, &options) == MCU_OK) {
                exercise(&p);
                if (flags == 0 && p.weights != NULL) {
                    check_weights_corruption(&p, program, program_size, &options, (uint32_t)size);
                }
                mcu_program_unload(&p);
            }
        }
    }
    free(program);
    free(weights);
    return 0;
}
