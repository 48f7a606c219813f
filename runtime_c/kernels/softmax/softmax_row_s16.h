/* One row of the 16x8 softmax (CMSIS-NN's arm_softmax_s16; TFLite Micro's int16 SOFTMAX), shared by
 * mcu_softmax_s16 and mcu_softmax_masked_s16: the differences from the maximum brought to the exp table's steps
 * (65536 over [-10, 0]), each exp read with a 7-bit interpolation and kept in the output; their sum normalised
 * to 17 bits reads 1 / (1 + x) over [0, 1]; each exp times that, shifted back by the sum's headroom, is the
 * probability in Q0.15. Where the normalised sum rounds up to 2^17 the reciprocal's input is 32768: TFLite's
 * reference saturates it to 32767 (1 / 2, right), CMSIS-NN's kernel wraps it to -32768 (1 / 1, twice the
 * probabilities); this saturates, and a probability past 32767 (a row of one element) saturates too.
 * mcu/reference/s16_act.py computes the same and derives both tables (TFLite's gen_lut; the tests check these
 * copies and CMSIS-NN's). Internal: static data and inline code only. */
#ifndef MCU_KERNELS_INTERNAL_SOFTMAX_ROW_S16_H
#define MCU_KERNELS_INTERNAL_SOFTMAX_ROW_S16_H

#include <stddef.h>
#include <stdint.h>

#include "../common/requant.h"
#include "tables_s16.h"

/* 1 / (1 + x) on [0, 1], 513 entries in Q0.15 */
static const int16_t mcu_recip_s16_table[513] = {
    32767, 32704, 32640, 32578, 32514, 32451, 32388, 32326, 32264, 32202, 32141, 32079, 32018, 31957, 31896, 31835,
    31775, 31715, 31655, 31596, 31537, 31476, 31418, 31359, 31301, 31242, 31184, 31127, 31069, 31011, 30954, 30897,
    30840, 30784, 30727, 30671, 30615, 30560, 30504, 30449, 30394, 30339, 30283, 30229, 30175, 30121, 30067, 30013,
    29960, 29906, 29853, 29800, 29746, 29694, 29642, 29589, 29537, 29486, 29434, 29382, 29331, 29280, 29229, 29177,
    29127, 29076, 29026, 28976, 28926, 28877, 28827, 28777, 28728, 28679, 28630, 28581, 28532, 28484, 28436, 28388,
    28340, 28292, 28244, 28197, 28150, 28103, 28056, 28008, 27962, 27915, 27869, 27823, 27777, 27731, 27685, 27640,
    27594, 27549, 27504, 27459, 27413, 27369, 27324, 27280, 27236, 27192, 27148, 27104, 27060, 27016, 26973, 26930,
    26887, 26844, 26801, 26758, 26715, 26673, 26630, 26588, 26546, 26504, 26463, 26421, 26380, 26338, 26297, 26255,
    26214, 26174, 26132, 26092, 26051, 26011, 25971, 25931, 25891, 25851, 25811, 25772, 25732, 25693, 25653, 25614,
    25575, 25536, 25497, 25458, 25420, 25381, 25343, 25305, 25267, 25229, 25191, 25153, 25116, 25078, 25041, 25003,
    24966, 24928, 24892, 24855, 24818, 24781, 24745, 24709, 24672, 24636, 24600, 24564, 24528, 24492, 24457, 24421,
    24385, 24350, 24315, 24280, 24245, 24210, 24175, 24140, 24105, 24070, 24036, 24002, 23967, 23933, 23899, 23865,
    23831, 23798, 23764, 23730, 23697, 23664, 23630, 23597, 23564, 23530, 23498, 23465, 23432, 23399, 23366, 23334,
    23302, 23269, 23237, 23205, 23173, 23141, 23109, 23077, 23046, 23014, 22982, 22951, 22920, 22888, 22857, 22826,
    22795, 22764, 22733, 22703, 22672, 22641, 22611, 22580, 22550, 22520, 22490, 22459, 22429, 22400, 22370, 22340,
    22310, 22281, 22251, 22221, 22192, 22163, 22134, 22104, 22075, 22046, 22017, 21988, 21959, 21931, 21902, 21874,
    21845, 21817, 21788, 21760, 21732, 21704, 21676, 21648, 21620, 21592, 21565, 21537, 21509, 21482, 21455, 21427,
    21400, 21372, 21345, 21318, 21291, 21264, 21237, 21210, 21183, 21157, 21130, 21103, 21077, 21050, 21024, 20998,
    20971, 20945, 20919, 20893, 20867, 20841, 20816, 20790, 20764, 20738, 20713, 20687, 20662, 20636, 20611, 20586,
    20560, 20535, 20510, 20485, 20460, 20435, 20410, 20385, 20360, 20336, 20311, 20287, 20262, 20238, 20213, 20189,
    20165, 20141, 20117, 20092, 20068, 20044, 20021, 19997, 19973, 19949, 19926, 19902, 19878, 19855, 19832, 19808,
    19784, 19762, 19738, 19715, 19692, 19668, 19645, 19622, 19600, 19577, 19553, 19531, 19508, 19485, 19463, 19440,
    19418, 19395, 19373, 19351, 19328, 19306, 19284, 19262, 19240, 19218, 19196, 19174, 19152, 19130, 19109, 19087,
    19065, 19044, 19022, 19000, 18979, 18958, 18936, 18915, 18893, 18872, 18851, 18830, 18809, 18787, 18766, 18745,
    18725, 18704, 18682, 18662, 18641, 18620, 18600, 18579, 18559, 18538, 18518, 18497, 18477, 18457, 18436, 18416,
    18396, 18376, 18356, 18336, 18316, 18296, 18276, 18256, 18236, 18216, 18197, 18177, 18157, 18138, 18118, 18099,
    18079, 18059, 18040, 18021, 18001, 17982, 17963, 17944, 17924, 17905, 17886, 17867, 17848, 17829, 17810, 17791,
    17772, 17754, 17735, 17716, 17697, 17679, 17660, 17641, 17623, 17604, 17586, 17568, 17549, 17531, 17513, 17494,
    17476, 17458, 17440, 17422, 17404, 17386, 17368, 17350, 17332, 17314, 17296, 17278, 17261, 17243, 17225, 17208,
    17190, 17172, 17155, 17137, 17120, 17102, 17085, 17067, 17050, 17033, 17015, 16999, 16981, 16964, 16947, 16930,
    16913, 16895, 16878, 16862, 16845, 16828, 16810, 16794, 16777, 16760, 16743, 16727, 16710, 16693, 16677, 16660,
    16644, 16627, 16611, 16594, 16578, 16562, 16545, 16529, 16513, 16497, 16480, 16464, 16448, 16432, 16416, 16400,
    16384
};

/* The row of n values at x[0], x[stride], ... into y (which may be x, exactly). Where `hidden` is not NULL, the
 * positions k with hidden[k] != 0 are minus infinity (a constant attention mask): no part in the maximum or the
 * sum, probability 0. The caller makes sure the row keeps a position. */
static inline void mcu_softmax_row_s16(const int16_t *x, int16_t *y, size_t stride, int32_t n, const uint8_t *hidden,
                                       int32_t input_multiplier, int32_t input_shift)
{
    /* (without a mask the first value starts the maximum, as arm_softmax_s16 does) */
    int32_t max = hidden == NULL ? x[0] : INT16_MIN;
    for (int32_t a = hidden == NULL ? 1 : 0; a < n; ++a) {
        const int32_t v = x[(size_t)a * stride];
        max = (hidden == NULL || !hidden[a]) && v > max ? v : max;
    }
    int32_t sum = 0;
    for (int32_t a = 0; a < n; ++a) {
        const size_t at = (size_t)a * stride;
        int32_t e = 0;
        if (hidden == NULL || !hidden[a]) {
            const int32_t scaled = mcu_requantize(x[at] - max, input_multiplier, input_shift);
            e = mcu_table_s16(mcu_exp_s16_table, mcu_clamp_s32(scaled + INT16_MAX, INT16_MIN, INT16_MAX));
        }
        /* (x[at] is read before y[at] is written: in place exactly) */
        y[at] = (int16_t)e;
        sum += e;
    }
    /* sum >= the maximum's exp (32767) and < 2^31: headroom in [1, 17] */
    int32_t headroom = 0;
    while (((uint32_t)sum << headroom) < 0x80000000u) {
        ++headroom;
    }
    const int32_t shifted = (int32_t)((((uint32_t)sum << (headroom - 1)) + (1u << 13)) >> 14);
    const int32_t recip = mcu_table_s16(mcu_recip_s16_table, mcu_clamp_s32(shifted - 98304, INT16_MIN, INT16_MAX));
    const int32_t right = 30 - headroom;
    for (int32_t a = 0; a < n; ++a) {
        const size_t at = (size_t)a * stride;
        /* (a row of one element rounds to 32769, which CMSIS-NN wraps to negative) */
        const int32_t q = (((int32_t)y[at] * recip >> right) + 1) >> 1;
        y[at] = (int16_t)(q < INT16_MAX ? q : INT16_MAX);
    }
}

#endif /* MCU_KERNELS_INTERNAL_SOFTMAX_ROW_S16_H */
