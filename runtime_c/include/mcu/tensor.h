/**
 * @file tensor.h
 * @brief Shapes shared by kernels of every dtype.
 */
#ifndef MCU_TENSOR_H
#define MCU_TENSOR_H

#include <stdint.h>

#define MCU_MAX_DIMS 6

/** A 4-D activation shape in NHWC order. */
typedef struct {
    int32_t n, h, w, c;
} mcu_shape4;

#endif /* MCU_TENSOR_H */
