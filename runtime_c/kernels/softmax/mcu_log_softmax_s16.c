/* int16 log-softmax (w8a16; CMSIS-NN has no int16 log-softmax, so this is ours on arm_softmax_s16's conventions)
 * over any axis. Per row (mcu/reference/s16_norm.py computes the same bit for bit):
 *   diff_i = q_i - max                          (int32, in [-65535, 0])
 *   e_i    = exp(diff_i s_in) in Q15 from the softmax's table: diff_i brought to the table's steps (65536 over
 *            [-10, 0]) and read with the 7-bit interpolation, 0 below -10 (the table's first entry, 1.5 / 2^15,
 *            would otherwise count once for every far value of a long row)
 *   sum    = sum e_i                            (int32: >= 32767, the maximum's, and < 2^31)
 *   L      = ln(sum / 2^15) in Q15: sum = 2^e (1 + f); (e - 15) ln 2 in Q30 rounded to Q15, plus ln(1 + f) read at
 *            f in Q16 from a 513-entry table over [0, 1]
 *   y_i    = clamp(rq(diff_i, s_in / s_out) - rq(L, 2^-15 / s_out))   (TFLite's requantization, twice) */
#include <stddef.h>

#include "mcu/kernels_s16.h"

#include "../common/check.h"
#include "../common/requant.h"
#include "tables_s16.h"

#define MCU_LN2_Q30 744261118 /* round(ln 2 2^30) */

/* ln(1 + x) on [0, 1], 513 entries in Q0.15 (TFLite's gen_lut) */
static const int16_t mcu_log1p_s16_table[513] = {
    0, 64, 128, 191, 255, 318, 382, 445, 509, 571, 634, 697, 759, 822, 884, 946,
    1008, 1070, 1132, 1194, 1255, 1317, 1379, 1440, 1501, 1562, 1624, 1684, 1745, 1806, 1866, 1926,
    1987, 2047, 2107, 2167, 2226, 2286, 2346, 2406, 2465, 2524, 2583, 2643, 2702, 2760, 2820, 2878,
    2937, 2995, 3053, 3112, 3170, 3228, 3286, 3343, 3401, 3459, 3516, 3574, 3631, 3688, 3746, 3803,
    3860, 3916, 3973, 4030, 4087, 4143, 4199, 4255, 4312, 4368, 4423, 4479, 4535, 4591, 4646, 4702,
    4757, 4813, 4868, 4923, 4978, 5033, 5088, 5143, 5197, 5252, 5306, 5361, 5415, 5469, 5523, 5577,
    5631, 5685, 5739, 5792, 5846, 5900, 5953, 6006, 6060, 6113, 6166, 6219, 6272, 6324, 6377, 6430,
    6483, 6535, 6587, 6640, 6692, 6744, 6796, 6848, 6900, 6951, 7003, 7055, 7106, 7158, 7209, 7261,
    7312, 7363, 7414, 7465, 7517, 7567, 7618, 7668, 7719, 7770, 7820, 7871, 7921, 7971, 8021, 8071,
    8121, 8171, 8221, 8270, 8320, 8370, 8419, 8469, 8518, 8568, 8616, 8666, 8715, 8764, 8813, 8862,
    8911, 8959, 9008, 9057, 9105, 9154, 9202, 9250, 9299, 9347, 9395, 9443, 9491, 9538, 9586, 9634,
    9682, 9729, 9777, 9824, 9871, 9919, 9966, 10013, 10061, 10108, 10155, 10202, 10248, 10296, 10342, 10389,
    10435, 10482, 10528, 10575, 10621, 10667, 10713, 10759, 10805, 10851, 10897, 10943, 10989, 11035, 11080, 11126,
    11171, 11217, 11262, 11307, 11353, 11398, 11443, 11489, 11534, 11579, 11623, 11668, 11713, 11758, 11803, 11847,
    11892, 11936, 11981, 12025, 12069, 12114, 12158, 12202, 12246, 12290, 12334, 12378, 12422, 12465, 12509, 12553,
    12596, 12640, 12683, 12727, 12770, 12814, 12856, 12900, 12943, 12986, 13029, 13072, 13115, 13158, 13201, 13244,
    13287, 13329, 13372, 13414, 13457, 13499, 13541, 13584, 13626, 13668, 13710, 13752, 13794, 13836, 13878, 13920,
    13962, 14004, 14045, 14087, 14128, 14170, 14211, 14253, 14295, 14336, 14377, 14418, 14460, 14501, 14542, 14583,
    14624, 14665, 14706, 14747, 14787, 14828, 14869, 14910, 14950, 14991, 15031, 15072, 15112, 15152, 15193, 15233,
    15273, 15313, 15353, 15393, 15433, 15473, 15513, 15553, 15592, 15632, 15672, 15711, 15751, 15791, 15830, 15869,
    15909, 15948, 15987, 16027, 16066, 16105, 16145, 16184, 16223, 16262, 16301, 16340, 16378, 16418, 16456, 16495,
    16534, 16572, 16610, 16649, 16688, 16726, 16765, 16803, 16841, 16879, 16918, 16956, 16994, 17032, 17070, 17108,
    17146, 17184, 17221, 17259, 17297, 17335, 17372, 17410, 17448, 17485, 17523, 17560, 17597, 17635, 17673, 17709,
    17747, 17784, 17821, 17859, 17896, 17933, 17970, 18007, 18044, 18080, 18117, 18155, 18191, 18228, 18265, 18301,
    18337, 18374, 18411, 18447, 18484, 18520, 18556, 18593, 18629, 18665, 18701, 18737, 18773, 18810, 18846, 18882,
    18917, 18953, 18989, 19025, 19061, 19096, 19132, 19168, 19203, 19239, 19275, 19310, 19346, 19381, 19416, 19452,
    19487, 19523, 19558, 19593, 19628, 19663, 19699, 19734, 19769, 19804, 19839, 19873, 19908, 19943, 19978, 20013,
    20048, 20083, 20117, 20151, 20186, 20221, 20255, 20290, 20324, 20359, 20393, 20427, 20462, 20496, 20530, 20564,
    20598, 20632, 20666, 20700, 20734, 20768, 20802, 20836, 20870, 20904, 20938, 20971, 21005, 21039, 21072, 21106,
    21140, 21173, 21207, 21240, 21274, 21307, 21340, 21374, 21407, 21441, 21474, 21507, 21540, 21573, 21607, 21640,
    21673, 21706, 21739, 21772, 21805, 21837, 21870, 21904, 21936, 21969, 22001, 22034, 22067, 22100, 22132, 22164,
    22197, 22230, 22262, 22295, 22327, 22359, 22392, 22424, 22456, 22488, 22521, 22553, 22585, 22617, 22649, 22681,
    22713
};

/* ln(sum / 2^15) in Q15 for 2^14 <= sum < 2^31 */
static int32_t log_sum_q15(int32_t sum)
{
    int32_t e = 30;
    while ((sum >> e) == 0) {
        --e;
    }
    const int32_t mant = (int32_t)((uint32_t)sum << (30 - e)); /* in [2^30, 2^31) */
    int32_t frac = ((mant - (1 << 30)) + (1 << 13)) >> 14;      /* f in Q16 */
    frac = frac < 65535 ? frac : 65535;
    const int64_t exponent = (int64_t)(e - 15) * MCU_LN2_Q30;
    return (int32_t)mcu_asr64(exponent + (1 << 14), 15) + mcu_table_s16(mcu_log1p_s16_table, frac - 32768);
}

mcu_status mcu_log_softmax_s16(const mcu_log_softmax_s16_params *p, const int16_t *input, int16_t *output)
{
    MCU_REQUIRE(p != NULL && input != NULL && output != NULL, MCU_ERR_NULL_POINTER);
    const int32_t dims[3] = {p->outer, p->axis, p->inner};
    const int32_t count = mcu_checked_count(dims, 3, 2);
    MCU_REQUIRE(count > 0 && p->axis <= MCU_SOFTMAX_S16_MAX_AXIS, MCU_ERR_SHAPE);
    MCU_REQUIRE(mcu_quant_valid(p->input_multiplier, p->input_shift) &&
                    mcu_quant_valid(p->diff_multiplier, p->diff_shift) &&
                    mcu_quant_valid(p->log_multiplier, p->log_shift),
                MCU_ERR_INVALID_ARG);
    const size_t bytes = (size_t)count * sizeof(int16_t);
    MCU_REQUIRE(!mcu_bad_alias(input, bytes, output, bytes), MCU_ERR_INVALID_ARG);
    const int32_t axis = p->axis, inner = p->inner;
    for (int32_t o = 0; o < p->outer; ++o) {
        for (int32_t j = 0; j < inner; ++j) {
            const int16_t *x = input + (size_t)o * (size_t)axis * (size_t)inner + (size_t)j;
            int16_t *y = output + (size_t)o * (size_t)axis * (size_t)inner + (size_t)j;
            int32_t max = x[0];
            for (int32_t a = 1; a < axis; ++a) {
                max = x[(size_t)a * (size_t)inner] > max ? x[(size_t)a * (size_t)inner] : max;
            }
            int32_t sum = 0;
            for (int32_t a = 0; a < axis; ++a) {
                const int32_t v =
                    mcu_requantize(x[(size_t)a * (size_t)inner] - max, p->input_multiplier, p->input_shift) +
                    INT16_MAX;
                sum += v < INT16_MIN ? 0 : mcu_table_s16(mcu_exp_s16_table, v < INT16_MAX ? v : INT16_MAX);
            }
            const int32_t log_out = mcu_requantize(log_sum_q15(sum), p->log_multiplier, p->log_shift);
            for (int32_t a = 0; a < axis; ++a) {
                const size_t at = (size_t)a * (size_t)inner;
                const int32_t d = mcu_requantize(x[at] - max, p->diff_multiplier, p->diff_shift);
                /* (both terms are at most 2^31 - 1 in magnitude: the difference is taken in 64 bits) */
                const int64_t q = (int64_t)d - log_out;
                y[at] = (int16_t)(q < INT16_MIN ? INT16_MIN : q > INT16_MAX ? INT16_MAX : q);
            }
        }
    }
    return MCU_OK;
}
