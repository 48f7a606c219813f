/* Internal to the program interpreter: a bounds-checked flatbuffer reader and
 * the field ids of runtime_c/schema/program.fbs.
 *
 * Every read goes through mcu_fb_* and is checked against the flatbuffer's
 * size; a read out of bounds, a misaligned table or vector, or an offset
 * that overflows sets the reader's sticky `bad` flag and yields 0, so code
 * can read a whole structure and test `bad` once. Position 0 holds the root
 * offset, so no table or vector can start there: 0 doubles as "absent". */
#ifndef MCU_PROGRAM_INTERNAL_H
#define MCU_PROGRAM_INTERNAL_H

#include <stdint.h>

#include "mcu/program.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the program reader assumes a little-endian target"
#endif

typedef struct {
    const uint8_t *b;
    uint32_t n;
    int bad;
} mcu_fb;

/* Field ids (declaration order in program.fbs). */
enum { MCU_QUANT_SCALE, MCU_QUANT_ZERO_POINT, MCU_QUANT_AXIS };
enum {
    MCU_TENSOR_NAME, MCU_TENSOR_DTYPE, MCU_TENSOR_SHAPE, MCU_TENSOR_DIM_ORDER, MCU_TENSOR_QUANT,
    MCU_TENSOR_PLACEMENT, MCU_TENSOR_INDEX, MCU_TENSOR_OFFSET, MCU_TENSOR_NBYTES
};
enum { MCU_INSN_KERNEL, MCU_INSN_OPERANDS, MCU_INSN_PARAMS, MCU_INSN_NAME };
enum { MCU_BUNDLED_INPUTS, MCU_BUNDLED_EXPECTED, MCU_BUNDLED_TOLERANCES };
enum {
    MCU_METHOD_NAME, MCU_METHOD_TENSORS, MCU_METHOD_INPUTS, MCU_METHOD_OUTPUTS, MCU_METHOD_INSTRUCTIONS,
    MCU_METHOD_ARENA_SIZES, MCU_METHOD_BUNDLED
};
enum { MCU_SEGMENT_NAME, MCU_SEGMENT_LOCATION, MCU_SEGMENT_OFFSET, MCU_SEGMENT_SIZE };
enum { MCU_DELEGATE_BACKEND, MCU_DELEGATE_SEGMENT };
enum { MCU_WEIGHTS_FILE_NAME, MCU_WEIGHTS_CONTENT_ID, MCU_WEIGHTS_SIZE };
enum {
    MCU_PROGRAM_VERSION_FIELD, MCU_PROGRAM_PRODUCER, MCU_PROGRAM_METHODS, MCU_PROGRAM_SEGMENTS,
    MCU_PROGRAM_DELEGATES, MCU_PROGRAM_EXTERNAL
};

enum { MCU_PLACEMENT_ARENA = 0, MCU_PLACEMENT_CONSTANT = 1 };
enum { MCU_SEGMENT_INLINE = 0, MCU_SEGMENT_EXTERNAL = 1 };

#define MCU_FB_ABSENT_INDEX 0xFFFFFFFFu

uint32_t mcu_fb_u32(mcu_fb *f, uint64_t pos);
/** Validate the table at `pos` (alignment, vtable bounds); 0 if invalid. */
uint32_t mcu_fb_table(mcu_fb *f, uint64_t pos);
/** Position of field `slot` (`width` bytes) of a table, 0 when absent. */
uint32_t mcu_fb_field(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t width);
/** A scalar field of 1, 2 or 4 bytes, zero-extended; `dflt` when absent. */
uint32_t mcu_fb_scalar(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t width, uint32_t dflt);
/** Position of element 0 of a vector field and its length (0, 0 when absent). */
uint32_t mcu_fb_vector(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t elem_size, uint32_t *count);
/** A sub-table field, 0 when absent. */
uint32_t mcu_fb_child(mcu_fb *f, uint32_t table, uint32_t slot);
/** Element `i` of a vector of tables (`i` must be below the vector's length). */
uint32_t mcu_fb_elem_table(mcu_fb *f, uint32_t vector, uint32_t i);
/** A NUL-terminated string field; "" when absent or invalid. */
const char *mcu_fb_string(mcu_fb *f, uint32_t table, uint32_t slot);
/** Table `i` of the vector field `slot` of `table`, checking `i` against its length. */
uint32_t mcu_fb_table_at(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t i);
/** Element `i` (u32) of the vector field `slot`, MCU_FB_ABSENT_INDEX when out of range. */
uint32_t mcu_fb_u32_at(mcu_fb *f, uint32_t table, uint32_t slot, uint32_t i);

void mcu_program_reader(const mcu_program *p, mcu_fb *f);
/** The method table, 0 when `method` is out of range. */
uint32_t mcu_program_method_table(mcu_fb *f, const mcu_program *p, uint32_t method);
int mcu_program_streq(const char *a, const char *b);

uint32_t mcu_dtype_size(uint32_t dtype);

/** Where a tensor lives and how large it is (fields as in program.fbs). */
typedef struct {
    uint32_t dtype;
    uint32_t placement;
    uint32_t index;
    uint32_t offset;
    uint32_t nbytes;
} mcu_program_tensor_desc;

void mcu_program_tensor(mcu_fb *f, const mcu_program *q, uint32_t tensor, mcu_program_tensor_desc *d);
/** Segment `index`: bounds and alignment checked against the inline or external data. */
mcu_status mcu_program_segment(mcu_fb *f, const mcu_program *q, uint32_t index, const uint8_t **data,
                               uint32_t *size);

/** Verify one instruction's operands and params; see mcu_program_kernels.c. */
typedef struct {
    uint32_t dtype;
    uint32_t nbytes;
    uint32_t constant;
    uint32_t present;
} mcu_operand_desc;

mcu_status mcu_program_check_kernel(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                    const int32_t *params, uint32_t n_params);
/** Call the kernel; operands and params already verified. */
mcu_status mcu_program_dispatch(uint32_t kernel, void *const *ops, const uint32_t *sizes, uint32_t n_ops,
                                const int32_t *params, uint32_t n_params, int32_t elem_size);

#endif /* MCU_PROGRAM_INTERNAL_H */
