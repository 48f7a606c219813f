/* mcu_depthwise_conv2d_s8_planes: the channel planes' stride-1 one-step lines with the constants packed ahead of
 * time (convolution/dw_plane_s8_dsp.h, mcu_dwpl_layer_packed; the layout in mcu/kernels_s8.h). */

#include <stddef.h>
#include <stdint.h>

#include "mcu/kernels_s8.h"

#include "../common/check.h"
#include "../common/mve_s8.h"
#include "dw_plane_s8_dsp.h"

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
    MCU_REQUIRE((uint32_t)packed[0] == MCU_DWPL_MAGIC && packed[1] == in.c && packed[2] == p->output_offset,
                MCU_ERR_INVALID_ARG);
#if MCU_S8_DSP && !MCU_S8_MVE
    mcu_dwpl_geom g;
    const int clamp = mcu_dwpl_finish(p->act_min, p->act_max, p->output_offset);
    const int ok = mcu_dwpl_geometry(&g, 3, 3, in.c, in.h, in.w) && g.band == g.lines;
    const int kind = ok ? MCU_DWPL_KIND(g.len, clamp) : 0;
    MCU_REQUIRE(kind == 3 || kind == 6, MCU_ERR_UNSUPPORTED);
    mcu_dwpl_layer_packed(&g, in.n, in.h, in.w, in.c, p->pad_top, p->pad_left, p->input_offset, p->act_min,
                          p->act_max, clamp, kind, (const uint32_t *)(const void *)(packed + MCU_DWPL_HEADER_WORDS),
                          data, data);
    return MCU_OK;
#else
    return MCU_ERR_UNSUPPORTED;
#endif
}
