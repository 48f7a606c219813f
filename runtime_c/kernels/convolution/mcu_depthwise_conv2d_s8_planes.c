/* mcu_depthwise_conv2d_s8_planes: the channel planes' stride-1 one-step lines with the constants packed ahead of
 * time (convolution/dw_plane_s8_dsp.h, mcu_dwpl_layer_packed; the layout in mcu/kernels_s8.h). */

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/mve_s8.h"
#include "../common/requant.h"
#include "dw_plane_s8_dsp.h"

#if !MCU_S8_DSP || MCU_S8_MVE
/* A lane of a word as a signed 16-bit value (no implementation-defined conversion). */
static int32_t planes_lane(uint32_t word)
{
    return (int32_t)(word & 0xFFFFu) - (int32_t)((word & 0x8000u) << 1);
}

/* The scale of a channel's weights and bias in the words: 2, or 2^e for the scaled form (e = MCU_DWPL_PACKED_SCALE
 * - R). */
static int32_t planes_scale(const int32_t *k, int scaled)
{
    return scaled ? (int32_t)1 << (MCU_DWPL_PACKED_SCALE - k[9]) : 2;
}

/* The layer from the packed words without the planes: a channel at a time, from a copy of its image so that the
 * output may overwrite the input; the words hold the weights and the bias times 2 (or 2^e, scaled: exact
 * multiples), the multiplier and R = -shift. Host builds of an Arm board's generated C run this, so the words must
 * mean the same here. */
static mcu_status planes_plain(const mcu_depthwise_conv2d_s8_params *p, int8_t *data, const int32_t *words,
                               int scaled)
{
    const mcu_shape4 in = p->input;
    MCU_REQUIRE((int64_t)in.h * in.w <= MCU_DWPL_PLAIN_PIXELS, MCU_ERR_UNSUPPORTED);
    for (int32_t c = 0; c < in.c; ++c) {
        const int32_t *k = words + (size_t)c * MCU_DWPL_PACKED_WORDS;
        const int32_t r_min = scaled ? MCU_DWPL_PACKED_SCALE - 8 : 1, r_max = scaled ? MCU_DWPL_PACKED_SCALE - 2 : 31;
        MCU_REQUIRE(k[7] >= 0 && k[9] >= r_min && k[9] <= r_max && k[6] % planes_scale(k, scaled) == 0,
                    MCU_ERR_INVALID_ARG);
    }
    const int transposed = in.h > in.w; /* the planes' lines run along the longer side */
    const size_t pixels = (size_t)in.h * (size_t)in.w;
    int8_t img[MCU_DWPL_PLAIN_PIXELS];
    for (int32_t n = 0; n < in.n; ++n) {
        int8_t *base = data + (size_t)n * pixels * (size_t)in.c;
        for (int32_t c = 0; c < in.c; ++c) {
            const int32_t *k = words + (size_t)c * MCU_DWPL_PACKED_WORDS;
            const int32_t f = planes_scale(k, scaled);
            int32_t w[3][3];
            for (int i = 0; i < 3; ++i) {
                const int32_t t[3] = {planes_lane((uint32_t)k[2 * i]) / f, planes_lane((uint32_t)k[2 * i] >> 16) / f,
                                      planes_lane((uint32_t)k[2 * i + 1] >> 16) / f};
                for (int j = 0; j < 3; ++j) {
                    w[transposed ? j : i][transposed ? i : j] = t[j];
                }
            }
            for (size_t px = 0; px < pixels; ++px) {
                img[px] = base[px * (size_t)in.c + (size_t)c];
            }
            for (int32_t y = 0; y < in.h; ++y) {
                for (int32_t x = 0; x < in.w; ++x) {
                    int32_t acc = k[6] / f;
                    for (int32_t i = 0; i < 3; ++i) {
                        const int32_t iy = y - p->pad_top + i;
                        for (int32_t j = 0; j < 3; ++j) {
                            const int32_t ix = x - p->pad_left + j;
                            if (iy >= 0 && iy < in.h && ix >= 0 && ix < in.w) {
                                acc += w[i][j] * ((int32_t)img[iy * in.w + ix] + p->input_offset);
                            }
                        }
                    }
                    base[((size_t)y * (size_t)in.w + (size_t)x) * (size_t)in.c + (size_t)c] =
                        mcu_requantize_to_s8(acc, k[7], -k[9], p->output_offset, p->act_min, p->act_max);
                }
            }
        }
    }
    return MCU_OK;
}
#endif

mcu_status mcu_depthwise_conv2d_s8_planes(const mcu_depthwise_conv2d_s8_params *p, int8_t *data,
                                          const int32_t *packed)
{
    MCU_REQUIRE(p != NULL && data != NULL && packed != NULL, MCU_ERR_NULL_POINTER);
    const mcu_shape4 in = p->input;
    const mcu_shape4 out = p->output;
    MCU_REQUIRE(p->stride_h == 1 && p->stride_w == 1 && p->dilation_h == 1 && p->dilation_w == 1 &&
                    p->ch_mult == 1 && p->kernel_h == 3 && p->kernel_w == 3 && p->pad_top >= 0 &&
                    p->pad_left >= 0 && p->pad_top < 3 && p->pad_left < 3,
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_input_offset_valid(p->input_offset) && mcu_output_offset_valid(p->output_offset) &&
                    mcu_act_s8_valid(p->act_min, p->act_max),
                MCU_ERR_INVALID_ARG);
    MCU_REQUIRE(mcu_shape4_count(&in, 1) > 0 && out.n == in.n && out.h == in.h && out.w == in.w && out.c == in.c,
                MCU_ERR_SHAPE);
    /* the words were packed for this layer: its channels and the output offset folded into them */
    const int scaled = (uint32_t)packed[0] == MCU_DWPL_MAGIC_SCALED;
    MCU_REQUIRE(((uint32_t)packed[0] == MCU_DWPL_MAGIC || scaled) && packed[1] == in.c &&
                    packed[2] == p->output_offset,
                MCU_ERR_INVALID_ARG);
    /* the scaled words leave out the sign correction: a ReLU folded into the range only */
    MCU_REQUIRE(!scaled || (p->act_min <= -128 && p->act_max >= 127 && p->output_offset == -128),
                MCU_ERR_INVALID_ARG);
#if MCU_S8_DSP && !MCU_S8_MVE
    mcu_dwpl_geom g;
    const int clamp = scaled ? MCU_DWPL_PACKED : mcu_dwpl_finish(p->act_min, p->act_max, p->output_offset);
    const int ok = mcu_dwpl_geometry(&g, 3, 3, in.c, in.h, in.w) && g.band == g.lines;
    const int kind = ok ? MCU_DWPL_KIND(g.len, clamp) : 0;
    MCU_REQUIRE(kind == 3 || kind == 6, MCU_ERR_UNSUPPORTED);
#if defined(__ARM_ARCH_8M_MAIN__)
    /* the straight blocks of a whole plane: the M33 only, whose fetches they suit (the L4R5's 1 kB ART missed them
     * at every channel: mobilenet_v1 +61 k estimated cycles there) */
    const int whole = mcu_dwpl_whole_kind(&g, in.c, g.transposed ? p->pad_left : p->pad_top,
                                          g.transposed ? p->pad_top : p->pad_left, clamp);
    if (whole != 0) {
        mcu_dwpl_layer_whole(&g, in.n, in.h, in.w, in.c, p->input_offset, whole,
                             (const uint32_t *)(const void *)(packed + MCU_DWPL_HEADER_WORDS), data, data);
        return MCU_OK;
    }
#endif
    mcu_dwpl_layer_packed(&g, in.n, in.h, in.w, in.c, p->pad_top, p->pad_left, p->input_offset, p->act_min,
                          p->act_max, clamp, kind, (const uint32_t *)(const void *)(packed + MCU_DWPL_HEADER_WORDS),
                          data, data);
    return MCU_OK;
#else
    return planes_plain(p, data, packed + MCU_DWPL_HEADER_WORDS, scaled);
#endif
}
