/* Internal to the program interpreter: a bounds-checked flatbuffer reader and
 * the field ids of runtime_c/schema/program.fbs.
 *
 * mcu_fb_table() validates a table once (alignment, vtable and table inside
 * the buffer) and keeps its vtable position and sizes, so field reads after
 * that are two range checks. A read out of bounds, a misaligned table or
 * vector, or an offset that overflows sets the reader's sticky `bad` flag and
 * yields 0 (an absent table: pos 0, no fields), so code can read a whole
 * structure and test `bad` once. Position 0 holds the root offset, so no
 * table or vector starts there: 0 doubles as "absent". Positions are 32-bit:
 * the loader only accepts files below 2 GiB. */
#ifndef MCU_PROGRAM_INTERNAL_H
#define MCU_PROGRAM_INTERNAL_H

#include <stdint.h>

#include "mcu/kernels_f32.h"
#include "mcu/kernels_generic.h"
#include "mcu/kernels_mixed.h"
#include "mcu/kernels_s16.h"
#include "mcu/kernels_s8.h"
#include "mcu/program.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the program reader assumes a little-endian target"
#endif

typedef struct {
    const uint8_t *b;
    uint32_t n;
    int bad;
} mcu_fb;

/** A validated table (pos 0: absent). */
typedef struct {
    uint32_t pos;
    uint32_t vt;
    uint32_t vt_size;
    uint32_t t_size;
} mcu_fbt;

/* Field ids (declaration order in program.fbs). */
enum { MCU_QUANT_SCALE, MCU_QUANT_ZERO_POINT, MCU_QUANT_AXIS };
enum {
    MCU_TENSOR_NAME, MCU_TENSOR_DTYPE, MCU_TENSOR_SHAPE, MCU_TENSOR_DIM_ORDER, MCU_TENSOR_QUANT,
    MCU_TENSOR_PLACEMENT, MCU_TENSOR_INDEX, MCU_TENSOR_OFFSET, MCU_TENSOR_NBYTES
};
enum { MCU_INSN_KERNEL, MCU_INSN_OPERANDS, MCU_INSN_PARAMS, MCU_INSN_NAME, MCU_INSN_STRIDES, MCU_INSN_ITERATIONS };
enum { MCU_BUNDLED_INPUTS, MCU_BUNDLED_EXPECTED, MCU_BUNDLED_TOLERANCES };
enum {
    MCU_METHOD_NAME, MCU_METHOD_TENSORS, MCU_METHOD_INPUTS, MCU_METHOD_OUTPUTS, MCU_METHOD_INSTRUCTIONS,
    MCU_METHOD_ARENA_SIZES, MCU_METHOD_BUNDLED
};
enum { MCU_SEGMENT_NAME, MCU_SEGMENT_LOCATION, MCU_SEGMENT_OFFSET, MCU_SEGMENT_SIZE, MCU_SEGMENT_CRC };
enum { MCU_DELEGATE_BACKEND, MCU_DELEGATE_SEGMENT };
enum { MCU_WEIGHTS_FILE_NAME, MCU_WEIGHTS_CONTENT_ID, MCU_WEIGHTS_SIZE };
enum {
    MCU_PROGRAM_VERSION_FIELD, MCU_PROGRAM_PRODUCER, MCU_PROGRAM_METHODS, MCU_PROGRAM_SEGMENTS,
    MCU_PROGRAM_DELEGATES, MCU_PROGRAM_EXTERNAL
};

enum { MCU_PLACEMENT_ARENA = 0, MCU_PLACEMENT_CONSTANT = 1, MCU_PLACEMENT_STREAMED = 2 };
enum { MCU_SEGMENT_INLINE = 0, MCU_SEGMENT_EXTERNAL = 1 };

#define MCU_FB_ABSENT_INDEX 0xFFFFFFFFu

uint32_t mcu_fb_u32(mcu_fb *f, uint32_t pos);
/** Validate the table at `pos` into `t`; returns t->pos (0 and bad when invalid). */
uint32_t mcu_fb_table(mcu_fb *f, uint32_t pos, mcu_fbt *t);
/** Position of field `slot` (`width` bytes) of a table, 0 when absent. */
uint32_t mcu_fb_field(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t width);
/** A scalar field of 1, 2 or 4 bytes, zero-extended; `dflt` when absent. */
uint32_t mcu_fb_scalar(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t width, uint32_t dflt);
/** Position of element 0 of a vector field and its length (0, 0 when absent). */
uint32_t mcu_fb_vector(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t elem_size, uint32_t *count);
/** A sub-table field (absent: pos 0). */
uint32_t mcu_fb_child(mcu_fb *f, const mcu_fbt *t, uint32_t slot, mcu_fbt *child);
/** Table `i` of a vector of tables at `vector` with `count` elements (bad when `i` is out of range). */
uint32_t mcu_fb_elem(mcu_fb *f, uint32_t vector, uint32_t count, uint32_t i, mcu_fbt *out);
/** Table `i` of the vector of tables field `slot` (bad when `i` is out of range). */
uint32_t mcu_fb_table_at(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t i, mcu_fbt *out);
/** A NUL-terminated, well-formed UTF-8 string field; "" when absent, "" and bad when invalid. */
const char *mcu_fb_string(mcu_fb *f, const mcu_fbt *t, uint32_t slot);
/** Element `i` (u32) of the vector field `slot`, MCU_FB_ABSENT_INDEX when out of range. */
uint32_t mcu_fb_u32_at(mcu_fb *f, const mcu_fbt *t, uint32_t slot, uint32_t i);

/** Where an instruction of a MCU_K_LOOP's body runs: the iterations [first, end) and how far each operand
 *  moves an iteration (bytes). Outside a loop: the one pass [0, 1), nothing moves. */
typedef struct {
    uint32_t first;
    uint32_t end;
    int32_t strides[MCU_PROGRAM_MAX_OPERANDS];
} mcu_program_step;

/** The strides and iterations fields of instruction `insn` (`n_ops` operands, at most
 *  MCU_PROGRAM_MAX_OPERANDS) in a loop of `count` iterations (0: in no loop, where neither field may be
 *  present); bad when they are malformed. */
void mcu_program_step_fields(mcu_fb *f, const mcu_fbt *insn, uint32_t n_ops, uint32_t count, mcu_program_step *s);

/** A reader over the program's flatbuffer, and its root table. */
void mcu_program_reader(const mcu_program *p, mcu_fb *f, mcu_fbt *root);
/** The method table (pos 0 when `method` is out of range). */
uint32_t mcu_program_method_table(mcu_fb *f, const mcu_program *p, uint32_t method, mcu_fbt *m);
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

/** Tensor `id` of a method (bad when out of range). */
void mcu_program_tensor(mcu_fb *f, const mcu_fbt *method, uint32_t id, mcu_fbt *t, mcu_program_tensor_desc *d);
/** Segment `index`: bounds and alignment checked against the inline or external data. */
mcu_status mcu_program_segment(mcu_fb *f, const mcu_program *q, uint32_t index, const uint8_t **data,
                               uint32_t *size);
/** The same with the segments vector already found (`vector`, `count`). */
mcu_status mcu_program_segment_in(mcu_fb *f, const mcu_program *q, uint32_t vector, uint32_t count, uint32_t index,
                                  const uint8_t **data, uint32_t *size);
/** Read the placement fields of a tensor table. */
void mcu_program_tensor_fields(mcu_fb *f, const mcu_fbt *t, mcu_program_tensor_desc *d);

/** One instruction's parameter words seen as each kernel's params struct (the kernels' and the
 * checks' view alike). */
typedef union {
    int32_t w[MCU_PROGRAM_MAX_PARAMS];
    float f[MCU_PROGRAM_MAX_PARAMS];
    mcu_conv2d_f32_params conv_f32;
    mcu_linear_f32_params linear_f32;
    mcu_pool2d_f32_params pool_f32;
    mcu_shape4 shape4;
    mcu_binary_f32_params binary_f32;
    mcu_permute_params permute;
    mcu_pad_params pad;
    mcu_conv2d_s8_params conv_s8;
    mcu_depthwise_conv2d_s8_params depthwise_s8;
    mcu_linear_s8_params linear_s8;
    mcu_linear_s16_params linear_s16;
    mcu_conv2d_s16_params conv_s16;
    mcu_conv2d_grouped_s16_params conv_grouped_s16;
    mcu_mean_s16_params mean_s16;
    mcu_add_s16_params add_s16;
    mcu_activation_s16_params activation_s16;
    mcu_mul_s16_params mul_s16;
    mcu_div_s16_params div_s16;
    mcu_softmax_s16_params softmax_s16;
    mcu_softmax_masked_s16_params softmax_masked_s16;
    mcu_bmm_s16_params bmm_s16;
    mcu_layer_norm_s16_params layer_norm_s16;
    mcu_log_softmax_s16_params log_softmax_s16;
    mcu_requantize_s16_params requantize_s16;
    mcu_pool2d_s16_params pool_s16;
    mcu_depthwise_conv2d_s16_params depthwise_s16;
    mcu_lstm_s16_params lstm_s16;
    mcu_gru_s16_params gru_s16;
    mcu_binary_s8_params binary_s8;
    mcu_pool2d_s8_params pool_s8;
    mcu_mean_hw_s8_params mean_hw_s8;
    mcu_softmax_s8_params softmax_s8;
    mcu_softmax_masked_s8_params softmax_masked_s8;
    mcu_slice_params slice;
    mcu_linear_w4_params linear_w4;
    mcu_index_put_params index_put;
    mcu_unary_f32_params unary_f32;
    mcu_layer_norm_f32_params layer_norm_f32;
    mcu_bmm_f32_params bmm_f32;
    mcu_reduce_f32_params reduce_f32;
    mcu_layer_norm_s8_params layer_norm_s8;
    mcu_group_norm_f32_params group_norm_f32;
    mcu_var_f32_params var_f32;
    mcu_prelu_f32_params prelu_f32;
    mcu_compare_params compare;
    mcu_where_params where;
    mcu_embedding_params embedding;
    mcu_remap_params remap;
    mcu_index_select_params index_select;
    mcu_gather_params gather;
    mcu_resample_f32_params resample_f32;
    mcu_resample_s8_params resample_s8;
    mcu_reduce_s8_params reduce_s8;
    mcu_bmm_s8_params bmm_s8;
    mcu_recurrent_s8_params recurrent_s8;
    mcu_prelu_s8_params prelu_s8;
    mcu_log_softmax_s8_params log_softmax_s8;
} mcu_program_params_view;

/** An operand as the kernel checks see it. */
typedef struct {
    uint32_t dtype;
    uint32_t nbytes;
    uint32_t constant;
    uint32_t present;
    uint32_t arena;             /**< arena tensors: which arena and where in it (aliasing checks) */
    uint32_t offset;
    const uint8_t *data;        /**< constants: their bytes (per-channel quantization checks) */
} mcu_operand_desc;

/** The elements each operand of an instruction must hold (`need`), from its params; checks of params that
 *  the count depends on. One per row of mcu_kernels.def (mcu_program_kernels.c). */
typedef mcu_status (*mcu_program_need_fn)(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                          const int32_t *p, uint32_t *need);
/** Whether the parameter words alone are in the kernel's range (mcu_program_params.c). */
typedef int (*mcu_program_params_fn)(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w);
/** Whether the memory between the operands (`bytes`: what the kernel touches in each) and the per-channel
 *  quantization constants are what the kernel accepts (mcu_program_params.c). */
typedef int (*mcu_program_alias_fn)(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,
                                    uint32_t n_ops, const int32_t *p);

/** One kernel of mcu_kernels.def as the loader checks it (a row per kernel this build keeps). */
typedef struct {
    const char *sig;   /**< operand dtypes, one letter each (mcu_kernels.def) */
    mcu_program_need_fn need;
    mcu_program_params_fn params;
    mcu_program_alias_fn alias;
    uint8_t n_params;
    uint8_t weights;   /**< 0, or the first operand that may share no byte with the output */
    uint8_t id;        /**< the kernel id (0 ends the rows) */
} mcu_program_kernel_row;

/* The helpers that many check functions share stay out of line: at -O2 GCC would copy each into every
 * caller (about a hundred small functions named by the table's rows), which costs kilobytes of flash in
 * code that runs once per program load. */
#define MCU_PROGRAM_SHARED __attribute__((noinline))

/* The check functions the table names (several kernels may name the same one). */
#define MCU_KERNEL(name, id, n_params, operands, weights, need, params, alias, ...)                                  \
    mcu_status mcu_program_need_##need(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,               \
                                       const int32_t *p, uint32_t *need_);                                         \
    int mcu_program_params_##params(uint32_t kernel, const mcu_program_params_view *u, const int32_t *w);           \
    int mcu_program_alias_##alias(uint32_t kernel, const mcu_operand_desc *ops, const uint32_t *bytes,             \
                                  uint32_t n_ops, const int32_t *p);
#include "mcu_kernels.def"
#undef MCU_KERNEL

/** Verify one instruction's operand dtypes, param count and operand sizes (mcu_program_kernels.c). */
mcu_status mcu_program_check_kernel(uint32_t kernel, const mcu_operand_desc *ops, uint32_t n_ops,
                                    const int32_t *params, uint32_t n_params);
/** The conditions kernel `row` tests on its parameter words alone (mcu_program_params.c). */
mcu_status mcu_program_check_params(uint32_t kernel, const mcu_program_kernel_row *row, const int32_t *params,
                                    uint32_t n_params);
/** The memory kernel `row` accepts between its operands (`bytes`: what the kernel touches in each) and its
 *  per-channel quantization constants (mcu_program_params.c). */
mcu_status mcu_program_check_operands(uint32_t kernel, const mcu_program_kernel_row *row, const mcu_operand_desc *ops,
                                      const uint32_t *bytes, uint32_t n_ops, const int32_t *params);
/** Call the kernel; operands and params already verified. */
mcu_status mcu_program_dispatch(uint32_t kernel, void *const *ops, const uint32_t *sizes, uint32_t n_ops,
                                const int32_t *params, uint32_t n_params, int32_t elem_size);

/* A streamed prefix (MCU_K_ROWS): its table's parts, each a run of int32 words (program.h). */
enum { MCU_ROWS_OPS, MCU_ROWS_RINGS, MCU_ROWS_CONSUMERS, MCU_ROWS_BODY, MCU_ROWS_STEPS, MCU_ROWS_DESCS,
       MCU_ROWS_N_PARAMS };
typedef struct {
    const int32_t *steps, *ops, *rings, *consumers, *body, *descs;
    uint32_t n[MCU_ROWS_N_PARAMS];
    uint32_t rings_bytes; /* the rings operand's size: every ring lies inside it */
} mcu_rows_table;

/** What a replay of the schedule does at each step: the loader checks, execution acts. The walk has
 *  already proved every offset it passes inside the rings operand. */
typedef struct mcu_rows_visitor {
    /** Move `bytes` from `from` to `to` (bytes into the rings operand; the ranges may overlap). */
    mcu_status (*move)(struct mcu_rows_visitor *v, uint32_t to, uint32_t from, uint32_t bytes);
    /** The streamed input's rows [y, y + rows) into the rings operand at `at` (`bytes` bytes). */
    mcu_status (*read)(struct mcu_rows_visitor *v, int32_t y, int32_t rows, uint32_t at, uint32_t bytes);
    /** Body instruction `body` with each operand moved `moves[k]` bytes from its place (0: not moved). */
    mcu_status (*call)(struct mcu_rows_visitor *v, uint32_t body, const int64_t *moves);
#ifdef MCU_TRACE
    /** A profiling build's execution: 1 + the ROWS instruction's index, whose steps the walk traces as
     *  events (mcu/plan/prefix.py's TRACE_SHIFT); 0 when it traces nothing (the loader's check). */
    uint32_t trace;
#endif
} mcu_rows_visitor;

/** The table of a MCU_K_ROWS instruction: `words` int32 words at `data` (4-byte aligned), `params` its
 *  counts; MCU_ERR_PROGRAM_INVALID when the parts' sizes do not add up or a count is out of range. */
mcu_status mcu_rows_table_init(mcu_rows_table *t, const uint8_t *data, uint32_t words, const int32_t *params,
                               uint32_t n_params, uint32_t rings_bytes);
/** Replay the schedule step by step (mcu_program_rows.c): every step's op, rows and body, every ring's
 *  capacity and moves, every op having made all its rows at the end are checked (MCU_ERR_PROGRAM_INVALID). */
mcu_status mcu_rows_walk(const mcu_rows_table *t, mcu_rows_visitor *v);

#endif /* MCU_PROGRAM_INTERNAL_H */
