/* Element moves for the dtype-agnostic kernels. Internal: static inline only.
 * memcpy with a constant size compiles to single (unaligned-safe) loads and
 * stores, so the common element sizes get their own loops. */
#ifndef MCU_KERNELS_INTERNAL_ELEM_H
#define MCU_KERNELS_INTERNAL_ELEM_H

#include <stdint.h>
#include <string.h>

/* n elements read `src_stride` bytes apart, written contiguously. */
static inline void mcu_gather_elems(uint8_t *dst, const uint8_t *src, int32_t n, int32_t src_stride,
                                    int32_t elem_size)
{
    switch (elem_size) {
    case 1:
        for (int32_t i = 0; i < n; ++i) {
            dst[i] = src[i * src_stride];
        }
        break;
    case 2:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 2 * i, src + i * src_stride, 2);
        }
        break;
    case 4:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 4 * i, src + i * src_stride, 4);
        }
        break;
    default:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + i * elem_size, src + i * src_stride, (size_t)elem_size);
        }
        break;
    }
}

/* Whether every byte of the element is the same, so filling is a memset
 * (zero padding, the usual case). */
static inline int mcu_elem_is_byte_pattern(const uint8_t *elem, int32_t elem_size)
{
    for (int32_t i = 1; i < elem_size; ++i) {
        if (elem[i] != elem[0]) {
            return 0;
        }
    }
    return 1;
}

/* n copies of one element. */
static inline void mcu_fill_elems(uint8_t *dst, int32_t n, const uint8_t *elem, int32_t elem_size,
                                  int byte_pattern)
{
    if (byte_pattern) {
        memset(dst, elem[0], (size_t)n * (size_t)elem_size);
        return;
    }
    switch (elem_size) {
    case 2:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 2 * i, elem, 2);
        }
        break;
    case 4:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + 4 * i, elem, 4);
        }
        break;
    default:
        for (int32_t i = 0; i < n; ++i) {
            memcpy(dst + i * elem_size, elem, (size_t)elem_size);
        }
        break;
    }
}

#endif /* MCU_KERNELS_INTERNAL_ELEM_H */
