"""The CMSIS-NN backend (mcu/backends/cmsis_nn/core.py): finding the sources, selection, parameter packing,
scratch sizing, the source closure and the generated calls.

The tests at the end run the real CMSIS-NN when ``CMSIS_NN_PATH`` names its source tree (a checkout of
github.com/ARM-software/CMSIS-NN) and skip without it, saying so. Everything around it is also tested
against our own kernels: a fake CMSIS-NN tree written here
(CMSIS-NN v7's types and prototypes, stub functions that translate CMSIS-NN's structs back into our
kernels' parameters and call them) proves the packing (offset signs, strides/padding order, filter
dims, per-channel quant pointers), the scratch planning with the run-time ``_get_buffer_size`` check,
and the build wiring: the generated calls compile with -Werror and run bit-exact with the Python
reference on the host and in QEMU. The stubs exist only in this test, never in the product.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from compiled import lowered_model
from mcu.api import backend_options
from mcu.backends.cmsis_nn import core as cmsis_nn
from mcu.errors import McuError
from mcu.paths import kernel_source
from repo import EXAMPLES, requires_qemu

TYPES_H = r"""
#ifndef ARM_NN_TYPES_H
#define ARM_NN_TYPES_H
#include <stdint.h>
#include <stddef.h>
typedef enum { ARM_CMSIS_NN_SUCCESS = 0, ARM_CMSIS_NN_ARG_ERROR = -1, ARM_CMSIS_NN_NO_IMPL_ERROR = -2 }
    arm_cmsis_nn_status;
typedef struct { int32_t w; int32_t h; } cmsis_nn_tile;
typedef struct { int32_t min; int32_t max; } cmsis_nn_activation;
typedef struct { int32_t n; int32_t h; int32_t w; int32_t c; } cmsis_nn_dims;
typedef struct { void *buf; int32_t size; } cmsis_nn_context;
typedef struct { int32_t input_offset; int32_t output_offset; cmsis_nn_tile stride; cmsis_nn_tile padding;
                 cmsis_nn_tile dilation; cmsis_nn_activation activation; } cmsis_nn_conv_params;
typedef struct { int32_t input_offset; int32_t output_offset; int32_t ch_mult; cmsis_nn_tile stride;
                 cmsis_nn_tile padding; cmsis_nn_tile dilation; cmsis_nn_activation activation; }
    cmsis_nn_dw_conv_params;
typedef struct { cmsis_nn_tile stride; cmsis_nn_tile padding; cmsis_nn_activation activation; }
    cmsis_nn_pool_params;
typedef struct { int32_t input_offset; int32_t filter_offset; int32_t output_offset;
                 cmsis_nn_activation activation; } cmsis_nn_fc_params;
typedef struct { int32_t *multiplier; int32_t *shift; } cmsis_nn_per_channel_quant_params;
typedef struct { int32_t multiplier; int32_t shift; } cmsis_nn_per_tensor_quant_params;
#endif
"""

FUNCTIONS_H = r"""
#ifndef ARM_NNFUNCTIONS_H
#define ARM_NNFUNCTIONS_H
#include "arm_nn_types.h"
#define CMSIS_WINDOW_ARGS(P) const cmsis_nn_context *ctx, const P *conv_params, \
    const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, \
    const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, \
    const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data
arm_cmsis_nn_status arm_convolve_wrapper_s8(CMSIS_WINDOW_ARGS(cmsis_nn_conv_params));
int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
    const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims);
arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(CMSIS_WINDOW_ARGS(cmsis_nn_dw_conv_params));
int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
    const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims);
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
    const cmsis_nn_per_tensor_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input,
    const cmsis_nn_dims *filter_dims, const int8_t *kernel, const cmsis_nn_dims *bias_dims, const int32_t *bias,
    const cmsis_nn_dims *output_dims, int8_t *output);
arm_cmsis_nn_status arm_fully_connected_per_channel_s8(const cmsis_nn_context *ctx,
    const cmsis_nn_fc_params *fc_params, const cmsis_nn_per_channel_quant_params *quant_params,
    const cmsis_nn_dims *input_dims, const int8_t *input, const cmsis_nn_dims *filter_dims, const int8_t *kernel,
    const cmsis_nn_dims *bias_dims, const int32_t *bias, const cmsis_nn_dims *output_dims, int8_t *output);
int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims);
arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
    const int32_t input_1_offset, const int32_t input_1_mult, const int32_t input_1_shift,
    const int32_t input_2_offset, const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift,
    int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift,
    const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size);
arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
    const int32_t input_1_offset, const int32_t input_2_offset, int8_t *output, const int32_t out_offset,
    const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min,
    const int32_t out_activation_max, const int32_t block_size);
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
    const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims,
    const cmsis_nn_dims *output_dims, int8_t *output_data);
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
    const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims,
    const cmsis_nn_dims *output_dims, int8_t *output_data);
int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src);
void arm_softmax_s8(const int8_t *input, const int32_t num_rows, const int32_t row_size, const int32_t mult,
    const int32_t shift, const int32_t diff_min, int8_t *output);
int32_t arm_nn_stub_status(int32_t mcu_status_value);
#endif
"""

# Test-only stubs: CMSIS-NN's API on top of our own kernels (included whole, so each stub links the kernel).
STUB_HELPERS = r"""
#include "mcu/kernels_s8.h"
static inline mcu_shape4 stub_dims4(const cmsis_nn_dims *d) { mcu_shape4 s = {d->n, d->h, d->w, d->c}; return s; }
"""


def _stub(includes: list[str], body: str) -> str:
    inc = "".join(f'#include "{kernel_source(k)}"\n' for k in includes)
    return f'#include "arm_nnfunctions.h"\n{inc}{STUB_HELPERS}{body}'


STUBS = {
    "NNSupportFunctions/arm_nn_stub_status.c": ('#include "arm_nnfunctions.h"\n'
                                                "int32_t arm_nn_stub_status(int32_t s) { return s == 0 ? "
                                                "ARM_CMSIS_NN_SUCCESS : ARM_CMSIS_NN_ARG_ERROR; }\n"),
    "Unused/arm_unused_s8.c": '#include "arm_nnfunctions.h"\nint32_t arm_unused_s8(int32_t x) { return x; }\n',
    "ConvolutionFunctions/arm_convolve_wrapper_s8.c": _stub(["mcu_conv2d_s8.c"], r"""
arm_cmsis_nn_status arm_convolve_wrapper_s8(CMSIS_WINDOW_ARGS(cmsis_nn_conv_params))
{
    (void)bias_dims;
    const mcu_conv2d_s8_params p = {stub_dims4(input_dims), stub_dims4(output_dims), filter_dims->h, filter_dims->w,
        conv_params->stride.h, conv_params->stride.w, conv_params->padding.h, conv_params->padding.w,
        conv_params->dilation.h, conv_params->dilation.w, input_dims->c / filter_dims->c, conv_params->input_offset,
        conv_params->output_offset, conv_params->activation.min, conv_params->activation.max};
    const mcu_per_channel_quant q = {quant_params->multiplier, quant_params->shift};
    const mcu_context c = {ctx->buf, ctx->size};
    if (filter_dims->n != output_dims->c) return ARM_CMSIS_NN_ARG_ERROR;
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_conv2d_s8(&c, &p, &q, input_data, filter_data, bias_data,
                                                                 output_data));
}
"""),
    "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s8.c": r"""#include "arm_nnfunctions.h"
int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
    const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims)
{
    (void)output_dims;
    if (conv_params->padding.w == 0 && conv_params->padding.h == 0 && filter_dims->w == 1 && filter_dims->h == 1
        && conv_params->dilation.w == 1 && conv_params->dilation.h == 1) return 0;
    const int32_t cols = input_dims->c * filter_dims->w * filter_dims->h;
#if defined(__ARM_FEATURE_MVE)
    return 4 * ((cols + 15) / 16) * 16;
#else
    return 2 * ((cols + 3) / 4 * 4) * 2;
#endif
}
""",
    "ConvolutionFunctions/arm_depthwise_conv_wrapper_s8.c": _stub(["mcu_depthwise_conv2d_s8.c"], r"""
arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(CMSIS_WINDOW_ARGS(cmsis_nn_dw_conv_params))
{
    (void)bias_dims;
    const mcu_depthwise_conv2d_s8_params p = {stub_dims4(input_dims), stub_dims4(output_dims), conv_params->ch_mult,
        filter_dims->h, filter_dims->w, conv_params->stride.h, conv_params->stride.w, conv_params->padding.h,
        conv_params->padding.w, conv_params->dilation.h, conv_params->dilation.w, conv_params->input_offset,
        conv_params->output_offset, conv_params->activation.min, conv_params->activation.max};
    const mcu_per_channel_quant q = {quant_params->multiplier, quant_params->shift};
    const mcu_context c = {ctx->buf, ctx->size};
    if (filter_dims->n != 1 || filter_dims->c != output_dims->c) return ARM_CMSIS_NN_ARG_ERROR;
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_depthwise_conv2d_s8(&c, &p, &q, input_data, filter_data,
                                                                           bias_data, output_data));
}
int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
    const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims)
{
    if (!(input_dims->c == output_dims->c && input_dims->n == 1 && dw_conv_params->dilation.w == 1
          && dw_conv_params->dilation.h == 1)) return 0;
#if !defined(__ARM_FEATURE_MVE)
    if (filter_dims->w == 3 && filter_dims->h == 3 && dw_conv_params->padding.w <= 1
        && dw_conv_params->padding.h <= 1) return 0;  /* arm_depthwise_conv_3x3_s8 */
#endif
#if defined(__ARM_FEATURE_MVE)
    return 4 * 124 * filter_dims->w * filter_dims->h;
#elif defined(__ARM_FEATURE_DSP)
    return input_dims->c * filter_dims->w * filter_dims->h * 2;
#else
    (void)filter_dims;
    return 0;
#endif
}
"""),
    "FullyConnectedFunctions/arm_fully_connected_s8.c": _stub(["mcu_linear_s8.c"], r"""
static arm_cmsis_nn_status fc(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
    const int32_t *mult, const int32_t *shift, const cmsis_nn_dims *input_dims, const int8_t *input,
    const cmsis_nn_dims *filter_dims, const int8_t *kernel, const int32_t *bias, const cmsis_nn_dims *output_dims,
    int8_t *output)
{
    const mcu_linear_s8_params p = {input_dims->n, filter_dims->n, output_dims->c, fc_params->input_offset,
        fc_params->output_offset, fc_params->activation.min, fc_params->activation.max};
    const mcu_per_channel_quant q = {mult, shift};
    const mcu_context c = {ctx->buf, ctx->size};
    if (fc_params->filter_offset != 0 || filter_dims->c != output_dims->c) return ARM_CMSIS_NN_ARG_ERROR;
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_linear_s8(&c, &p, &q, input, kernel, bias, output));
}
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params,
    const cmsis_nn_per_tensor_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input,
    const cmsis_nn_dims *filter_dims, const int8_t *kernel, const cmsis_nn_dims *bias_dims, const int32_t *bias,
    const cmsis_nn_dims *output_dims, int8_t *output)
{
    int32_t mult[512], shift[512];
    (void)bias_dims;
    if (output_dims->c > 512) return ARM_CMSIS_NN_ARG_ERROR;
    for (int32_t i = 0; i < output_dims->c; i++) { mult[i] = quant_params->multiplier; shift[i] = quant_params->shift; }
    return fc(ctx, fc_params, mult, shift, input_dims, input, filter_dims, kernel, bias, output_dims, output);
}
arm_cmsis_nn_status arm_fully_connected_per_channel_s8(const cmsis_nn_context *ctx,
    const cmsis_nn_fc_params *fc_params, const cmsis_nn_per_channel_quant_params *quant_params,
    const cmsis_nn_dims *input_dims, const int8_t *input, const cmsis_nn_dims *filter_dims, const int8_t *kernel,
    const cmsis_nn_dims *bias_dims, const int32_t *bias, const cmsis_nn_dims *output_dims, int8_t *output)
{
    (void)bias_dims;
    return fc(ctx, fc_params, quant_params->multiplier, quant_params->shift, input_dims, input, filter_dims, kernel,
              bias, output_dims, output);
}
int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims)
{
#if defined(__ARM_FEATURE_MVE)
    return filter_dims->c * 4;
#else
    (void)filter_dims;
    return 0;
#endif
}
"""),
    "BasicMathFunctions/arm_elementwise_add_s8.c": _stub(["mcu_add_s8.c"], r"""
arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
    const int32_t input_1_offset, const int32_t input_1_mult, const int32_t input_1_shift,
    const int32_t input_2_offset, const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift,
    int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift,
    const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size)
{
    const mcu_binary_s8_params p = {1, {block_size, 1, 1, 1, 1, 1}, {1, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0},
        input_1_offset, input_2_offset, input_1_mult, input_1_shift, input_2_mult, input_2_shift, left_shift,
        out_mult, out_shift, out_offset, out_activation_min, out_activation_max};
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_add_s8(&p, input_1_vect, input_2_vect, output));
}
"""),
    "BasicMathFunctions/arm_elementwise_mul_s8.c": _stub(["mcu_mul_s8.c"], r"""
arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *input_1_vect, const int8_t *input_2_vect,
    const int32_t input_1_offset, const int32_t input_2_offset, int8_t *output, const int32_t out_offset,
    const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min,
    const int32_t out_activation_max, const int32_t block_size)
{
    const mcu_binary_s8_params p = {1, {block_size, 1, 1, 1, 1, 1}, {1, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0},
        input_1_offset, input_2_offset, 0, 0, 0, 0, 0, out_mult, out_shift, out_offset, out_activation_min,
        out_activation_max};
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_mul_s8(&p, input_1_vect, input_2_vect, output));
}
"""),
    "PoolingFunctions/arm_max_pool_s8.c": _stub(["mcu_max_pool2d_s8.c"], r"""
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
    const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims,
    const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    const mcu_pool2d_s8_params p = {stub_dims4(input_dims), stub_dims4(output_dims), filter_dims->h, filter_dims->w,
        pool_params->stride.h, pool_params->stride.w, pool_params->padding.h, pool_params->padding.w,
        pool_params->activation.min, pool_params->activation.max};
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_max_pool2d_s8(&p, input_data, output_data));
}
"""),
    "PoolingFunctions/arm_avgpool_s8.c": _stub(["mcu_avg_pool2d_s8.c"], r"""
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params,
    const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims,
    const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    const mcu_pool2d_s8_params p = {stub_dims4(input_dims), stub_dims4(output_dims), filter_dims->h, filter_dims->w,
        pool_params->stride.h, pool_params->stride.w, pool_params->padding.h, pool_params->padding.w,
        pool_params->activation.min, pool_params->activation.max};
    return (arm_cmsis_nn_status)arm_nn_stub_status(mcu_avg_pool2d_s8(&p, input_data, output_data));
}
int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src)
{
    (void)dim_dst_width;
#if defined(__ARM_FEATURE_DSP) && !defined(__ARM_FEATURE_MVE)
    return ch_src * 4;
#else
    (void)ch_src;
    return 0;
#endif
}
"""),
    "SoftmaxFunctions/arm_softmax_s8.c": _stub(["mcu_softmax_s8.c"], r"""
void arm_softmax_s8(const int8_t *input, const int32_t num_rows, const int32_t row_size, const int32_t mult,
    const int32_t shift, const int32_t diff_min, int8_t *output)
{
    const mcu_softmax_s8_params p = {num_rows, row_size, 1, mult, shift, diff_min};
    (void)mcu_softmax_s8(&p, input, output);
}
"""),
}


@pytest.fixture(scope="module")
def fake_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cmsis") / "CMSIS-NN"
    (root / "Include").mkdir(parents=True)
    (root / "Include" / "arm_nn_types.h").write_text(TYPES_H)
    (root / "Include" / "arm_nnfunctions.h").write_text(FUNCTIONS_H)
    for rel, text in STUBS.items():
        path = root / "Source" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# --- finding the sources -----------------------------------------------------------------------------------


def test_resolve_paths_env_and_pack_cache(fake_tree: Path, tmp_path: Path) -> None:
    assert cmsis_nn.resolve(None, env={}) is None
    assert cmsis_nn.resolve(str(fake_tree), env={}) == fake_tree.resolve()
    assert cmsis_nn.resolve(str(fake_tree.parent), env={}) == fake_tree.resolve()  # the folder holding CMSIS-NN
    assert cmsis_nn.cli_spec(None, env={"CMSIS_NN_PATH": "/x"}) == ("/x", "CMSIS_NN_PATH")
    assert cmsis_nn.cli_spec("/y", env={"CMSIS_NN_PATH": "/x"}) == ("/y", "--cmsis-nn")
    assert cmsis_nn.cli_spec(None, env={}) == (None, "")
    with pytest.raises(McuError, match="not a CMSIS-NN source tree"):
        cmsis_nn.resolve(str(tmp_path), env={})
    # auto: CMSIS_NN_PATH first, else the newest ARM/CMSIS-NN/<version> in the pack cache
    assert cmsis_nn.resolve("auto", env={"CMSIS_NN_PATH": str(fake_tree)}, cache_dirs=[]) == fake_tree.resolve()
    with pytest.raises(McuError, match="pack cache"):
        cmsis_nn.resolve("auto", env={}, cache_dirs=[tmp_path])
    import shutil

    for version in ("6.0.0", "7.0.0", "4.1.0"):
        shutil.copytree(fake_tree, tmp_path / "ARM" / "CMSIS-NN" / version)
    assert cmsis_nn.resolve("auto", env={}, cache_dirs=[tmp_path]).name == "7.0.0"


def test_source_closure_is_only_what_the_calls_need(fake_tree: Path) -> None:
    lib = cmsis_nn.CmsisNN(fake_tree)
    names = {p.name for p in lib.sources(["arm_convolve_wrapper_s8", "arm_convolve_wrapper_s8_get_buffer_size"])}
    assert names == {"arm_convolve_wrapper_s8.c", "arm_convolve_get_buffer_sizes_s8.c", "arm_nn_stub_status.c"}
    assert lib.has("arm_fully_connected_per_channel_s8") and not lib.has("arm_convolve_s16")


# --- scratch sizing (CMSIS-NN v7's _get_buffer_size functions) ----------------------------------------------


def test_scratch_formulas() -> None:
    conv = {"input": {"n": 1, "h": 8, "w": 8, "c": 3}, "filter": {"n": 16, "h": 3, "w": 3, "c": 3},
            "output": {"n": 1, "h": 8, "w": 8, "c": 16}, "padding": (1, 1), "dilation": (1, 1), "stride": (1, 1)}
    # 27 columns: int16 x 2 columns padded to 28 (DSP/plain); int8 x 4 columns of whole 16-lane vectors (MVE)
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("dsp", conv) == 2 * 28 * 2
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("plain", conv) == 2 * 28 * 2
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("mve", conv) == 4 * 32
    pointwise = dict(conv, padding=(0, 0), filter={"n": 16, "h": 1, "w": 1, "c": 3})
    assert all(cmsis_nn.convolve_wrapper_s8_buffer_size(a, pointwise) == 0 for a in cmsis_nn.ARCHES)
    # DS-CNN's first layer on M55: 40 columns -> 4 x 48 (4 x 40 would make the M55 buffer too small)
    first = dict(conv, input={"n": 1, "h": 49, "w": 10, "c": 1}, filter={"n": 64, "h": 10, "w": 4, "c": 1},
                 output={"n": 1, "h": 25, "w": 5, "c": 64}, padding=(1, 4), stride=(2, 2))
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("mve", first) == 4 * 48
    # a 1xN row convolution on MVE: the padded windows of the row, not an im2col of four columns
    row = {"input": {"n": 1, "h": 1, "w": 16, "c": 8}, "filter": {"n": 8, "h": 1, "w": 3, "c": 8},
           "output": {"n": 1, "h": 1, "w": 16, "c": 8}, "padding": (1, 0), "dilation": (1, 1), "stride": (1, 1)}
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("mve", row) == 3 * 8 + 8
    assert cmsis_nn.convolve_wrapper_s8_buffer_size("dsp", row) == 2 * 24 * 2
    dw = {"input": {"n": 1, "h": 25, "w": 5, "c": 64}, "filter": {"n": 1, "h": 5, "w": 5, "c": 64},
          "output": {"n": 1, "h": 25, "w": 5, "c": 64}, "dilation": (1, 1), "padding": (2, 2), "stride": (1, 1)}
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("dsp", dw) == 64 * 25 * 2
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("mve", dw) == 4 * 124 * 25
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("plain", dw) == 0
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("dsp", dict(dw, dilation=(2, 1))) == 0
    dw3 = dict(dw, filter={"n": 1, "h": 3, "w": 3, "c": 64}, padding=(1, 1))  # arm_depthwise_conv_3x3_s8: none
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("dsp", dw3) == 0
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("mve", dw3) == 4 * 124 * 9
    one_in = dict(dw3, input={"n": 1, "h": 25, "w": 5, "c": 1}, filter={"n": 1, "h": 3, "w": 3, "c": 8},
                  output={"n": 1, "h": 25, "w": 5, "c": 8})  # MVE runs it as a convolution
    assert cmsis_nn.depthwise_wrapper_s8_buffer_size("mve", one_in) == 4 * 16 + 8 * 9
    assert cmsis_nn.fully_connected_s8_buffer_size("mve", 12) == 48
    assert cmsis_nn.fully_connected_s8_buffer_size("dsp", 12) == 0
    assert cmsis_nn.avgpool_s8_buffer_size("dsp", 64) == 256 and cmsis_nn.avgpool_s8_buffer_size("mve", 64) == 0


# --- selection, packing and the generated calls --------------------------------------------------------------

ROUTED_MODELS = ["small_cnn", "ds_cnn", "resnet8", "fc_autoencoder"]
# One xdist worker per example (tests/conftest.py), the one that lowers it for the other files' tests too.
GROUP_BY_EXAMPLE = True


@pytest.fixture(scope="module")
def routed(fake_tree: Path):
    cache: dict = {}

    def get(name: str, board: str = "mps2-an505"):
        if (name, board) not in cache:
            cache[name, board] = lowered_model(name, "int8").compile(board, options=backend_options(fake_tree))
        return cache[name, board]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", ROUTED_MODELS)
def test_packing_matches_our_kernels(routed, compiled, name: str) -> None:
    cm, ours = routed(name), compiled(name, quantize="int8")
    c = cm.library.files[f"{cm.library.prefix}_model.c"]
    assert '#include "arm_nnfunctions.h"' in c
    assert cm.library.include_dirs and all(Path(s).is_absolute() for s in cm.library.kernel_sources
                                           if s.startswith("/"))
    routed_ops = [op for op in cm.graph.ops if op.attrs.get("backend") == "cmsis-nn"]
    assert routed_ops
    for op in routed_ops:
        info = op.attrs["cmsis_nn"]
        assert info["arch"] == "dsp"
        if info["scratch"]:
            assert id(op) in cm.memory.scratch_offsets
        if op.kind in ("conv2d", "depthwise_conv2d", "linear"):
            # offsets: CMSIS-NN's sign conventions are ours (input_offset = -zero point, output = +zero point)
            zp_in = op.inputs[0].quant.zero_point[0]
            zp_out = op.output.quant.zero_point[0]
            assert op.attrs["input_offset"] == -zp_in and op.attrs["output_offset"] == zp_out
            assert f".input_offset = {-zp_in}, " in c and f".output_offset = {zp_out}, " in c
    # the per-channel multipliers and shifts are the very constants our kernels use
    for op, mine in zip(cm.graph.ops, ours.graph.ops):
        if op.attrs.get("backend") == "cmsis-nn" and op.kind in ("conv2d", "depthwise_conv2d"):
            np.testing.assert_array_equal(op.inputs[3].data, mine.inputs[3].data)
            np.testing.assert_array_equal(op.inputs[4].data, mine.inputs[4].data)
    assert "arm_unused_s8.c" not in " ".join(cm.library.kernel_sources)


def test_generated_conv_call_text(routed) -> None:
    cm = routed("small_cnn")
    c = cm.library.files[f"{cm.library.prefix}_model.c"]
    assert "arm_convolve_wrapper_s8(&cmsis_ctx, &conv_params, &cmsis_quant, &input_dims, " in c
    assert "if (arm_convolve_wrapper_s8_get_buffer_size(&conv_params, &input_dims, &filter_dims, &output_dims) " \
           "> cmsis_ctx.size) return MCU_ERR_BUFFER_TOO_SMALL;" in c
    assert "== ARM_CMSIS_NN_SUCCESS ? MCU_OK : MCU_ERR_UNSUPPORTED" in c
    op = next(o for o in cm.graph.ops if o.kind == "conv2d")
    c_out, c_in, kh, kw = op.inputs[1].shape
    assert f"const cmsis_nn_dims filter_dims = {{.n = {c_out}, .h = {kh}, .w = {kw}, .c = {c_in}}};" in c
    s, p = op.attrs["stride"], op.attrs["padding"]
    assert f".stride = {{.w = {s[1]}, .h = {s[0]}}}, .padding = {{.w = {p[1]}, .h = {p[0]}}}" in c


def test_mve_fully_connected_takes_compile_time_kernel_sums(routed) -> None:
    cm = routed("fc_autoencoder", "mps3-an547")
    c = cm.library.files[f"{cm.library.prefix}_model.c"]
    linears = [op for op in cm.graph.ops if op.kind == "linear"]
    assert linears and all(op.attrs.get("backend") == "cmsis-nn" for op in linears)
    for op in linears:
        assert op.attrs["cmsis_nn"]["arch"] == "mve" and op.attrs["cmsis_nn"]["scratch"] == 0
        sums = op.attrs["cmsis_kernel_sums"].data.astype(np.int64)
        w = op.inputs[1].data.astype(np.int64).reshape(op.inputs[1].shape[0], -1)
        bias = op.inputs[2].data.astype(np.int64)
        np.testing.assert_array_equal(sums, bias + op.attrs["input_offset"] * w.sum(axis=1))
    assert "const cmsis_nn_context cmsis_ctx = {.buf = (void *)" in c
    report = cm.partitions.to_json()
    assert [p["backend"] for p in report["partitions"]] == ["cmsis-nn"]


def test_unsupported_layers_stay_on_our_kernels_with_the_reason(routed) -> None:
    cm = routed("small_cnn", "mps3-an547")
    for op in cm.graph.ops:
        if op.kind == "conv2d":
            assert op.attrs["cmsis_nn"]["arch"] == "mve"
        if op.kind == "mean_hw":
            assert op.attrs["backend"] == "portable"
    why = {r.op: r.why for r in cm.partitions.refusals if r.backend == "cmsis-nn"}
    mean = next(op.name for op in cm.graph.ops if op.kind == "mean_hw")
    assert why[mean] == "no cmsis-nn support for mean_hw"


@pytest.mark.parametrize("name", ROUTED_MODELS)
def test_host_build_through_cmsis_calls_is_bit_exact(routed, name: str) -> None:
    cm = routed(name)
    for x in cm.spec.test_inputs[:4]:
        for ref, host in zip(cm.reference_raw(*x), cm.run_raw_c(*x)):
            np.testing.assert_array_equal(host, ref)
    assert cm.run_raw(*cm.spec.test_inputs[0])[0].dtype == np.int8  # program path falls back to the C


@pytest.mark.slow
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", ["mps2-an505", "mps3-an547"])
def test_firmware_through_cmsis_calls_is_bit_exact(routed, board: str) -> None:
    cm = routed("ds_cnn", board)
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)


def test_cli_option(fake_tree: Path, tmp_path: Path) -> None:
    from mcu.commands.cli import build_parser

    args = build_parser().parse_args(["build", str(EXAMPLES / "small_cnn.py"), "-b", "mps2-an505",
                                      "--cmsis-nn", str(fake_tree)])
    assert args.cmsis_nn == str(fake_tree)
    args = build_parser().parse_args(["run", str(EXAMPLES / "small_cnn.py"), "-b", "mps2-an505"])
    assert args.cmsis_nn is None


# --- real CMSIS-NN ------------------------------------------------------------------------------------------

REAL = os.environ.get("CMSIS_NN_PATH")
needs_real = pytest.mark.skipif(not REAL or not cmsis_nn.is_tree(Path(REAL or ".")),
                                reason=f"{cmsis_nn.ENV_VAR} does not name a CMSIS-NN source tree "
                                       "(a checkout of github.com/ARM-software/CMSIS-NN)")
REAL_BOARDS = ["mps2-an505", "mps2-an386", "mps3-an547", "mps2-an385"]


def _through_real_cmsis(name: str, board: str):
    """The model at int8 with CMSIS-NN first in the preference order; quantized once per model."""
    from mcu.api import backend_options

    return lowered_model(name, "int8").compile(board, options=backend_options(REAL))


@needs_real
@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("board", REAL_BOARDS)
@pytest.mark.parametrize("name", ["small_cnn", "ds_cnn", "mobilenet_v1", "resnet8", "fc_autoencoder"])
def test_real_cmsis_nn_is_bit_exact_with_our_kernels(name: str, board: str) -> None:
    """Every reference model through the real CMSIS-NN on four cores: the firmware's outputs equal the
    Python integer reference (which our kernels equal bit for bit) on every bundled vector, and the
    report says what CMSIS-NN took and why it refused the rest."""
    cm = _through_real_cmsis(name, board)
    report = cm.partitions
    took = [op for b, ops in report.partitions if b == "cmsis-nn" for op in ops]
    assert took, f"CMSIS-NN took nothing of {name} on {board}"
    ops = {op.name: op for op in cm.graph.ops}
    for op_name in took:
        assert ops[op_name].attrs["cmsis_nn"]["arch"] == cmsis_nn.arch_of(cm.board)
    for op in cm.graph.ops:  # every op CMSIS-NN did not take has its reason in the report
        if op.attrs["backend"] != "cmsis-nn":
            assert any(r.op == op.name and r.backend == "cmsis-nn" and r.why for r in report.refusals), op.name
    sim = cm.simulate()
    assert sim.passed and sim.exit_code == 0, sim.console[-2000:]
    for raw, expected in zip(sim.outputs_raw, cm.expected_outputs):
        for got, want in zip(raw, cm.raw_outputs(expected)):
            np.testing.assert_array_equal(got, want)
