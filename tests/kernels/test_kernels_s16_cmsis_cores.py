"""Our 16x8 linear, convolution, depthwise, add, mul and LSTM kernels and CMSIS-NN's (arm_fully_connected_s16,
arm_convolve_s16, arm_depthwise_conv_wrapper_s16, arm_elementwise_add_s16, arm_elementwise_mul_s16,
arm_lstm_unidirectional_s16) built for the M33, the M4 and the M55 from the tree CMSIS_NN_PATH names, so with their
DSP and Helium paths, run on the same inputs in one firmware per core in QEMU: every output of both equals the Python
reference (test_kernels_s16*.py compare the two on the host, where CMSIS-NN builds its portable C)."""

from __future__ import annotations

import numpy as np
import pytest

from cmsis_nn_host import cmsis_nn_root
from mcu.reference.arith import add_params
from mcu.reference.lstm_s16 import layer_params, lstm_s16
from mcu.reference.s16 import SHIFT_MAX, add_s16, conv2d_s16, depthwise_conv2d_s16, linear_s16
from mcu.reference.s16_act import mul_params, mul_s16
from mve_cases import Builder, Case, assert_case, c_dims, run_cases

KERNELS = ["mcu_linear_s16.c", "mcu_conv2d_s16.c", "mcu_depthwise_conv2d_s16.c", "mcu_add_s16.c", "mcu_mul_s16.c",
           "mcu_lstm_s16.c"]
CMSIS_S16 = ("FullyConnectedFunctions/arm_fully_connected_s16.c", "NNSupportFunctions/arm_nn_vec_mat_mult_t_s16.c",
             "ConvolutionFunctions/arm_convolve_s16.c", "ConvolutionFunctions/arm_convolve_get_buffer_sizes_s16.c",
             "ConvolutionFunctions/arm_nn_mat_mult_kernel_s16.c", "ConvolutionFunctions/arm_depthwise_conv_s16.c",
             "ConvolutionFunctions/arm_depthwise_conv_fast_s16.c",
             "ConvolutionFunctions/arm_depthwise_conv_wrapper_s16.c",
             "ConvolutionFunctions/arm_depthwise_conv_get_buffer_sizes_s16.c",
             "NNSupportFunctions/arm_nn_depthwise_conv_nt_t_s16.c", "NNSupportFunctions/arm_nn_mat_mult_nt_t_s16.c",
             "BasicMathFunctions/arm_elementwise_add_s16.c", "BasicMathFunctions/arm_elementwise_mul_s16.c",
             "LSTMFunctions/arm_lstm_unidirectional_s16.c", "NNSupportFunctions/arm_nn_lstm_step_s16.c",
             "NNSupportFunctions/arm_nn_lstm_calculate_gate_s16.c",
             "NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s16.c", "ActivationFunctions/arm_nn_activation_s16.c",
             "BasicMathFunctions/arm_elementwise_mul_acc_s16.c",
             "BasicMathFunctions/arm_elementwise_mul_s16_batch_offset.c", "NNSupportFunctions/arm_nntables.c")
# Inputs within +-2^12 keep CMSIS-NN's int32 window sums from wrapping (ours are exact in 64 bits).
X_MAX = 2**12


def _data(rng, shape) -> np.ndarray:
    x = rng.integers(-X_MAX, X_MAX + 1, size=shape).astype(np.int16)
    x.flat[: min(x.size, 3)] = [-X_MAX, X_MAX, 0][: min(x.size, 3)]
    return x


def _weights(rng, shape) -> np.ndarray:
    w = rng.integers(-128, 128, size=shape).astype(np.int8)
    w.flat[: min(w.size, 2)] = [-128, 127][: min(w.size, 2)]
    return w


def _quant(rng, channels: int, taps: int, per_channel: bool):
    """Multipliers in [2^30, 2^31) and shifts that put the sums on int16 (some saturating), int64 biases, a
    clamp that is the whole range or narrower."""
    centre = int(round(np.log2(2**13 / (X_MAX / 1.7 * 74 * np.sqrt(taps))))) + 1
    n = channels if per_channel else 1
    m = rng.integers(2**30, 2**31, size=n, dtype=np.int64)
    s = np.clip(centre + rng.integers(-2, 3, size=n), -31, SHIFT_MAX)
    m, s = np.resize(m, channels).astype(np.int32), np.resize(s, channels).astype(np.int32)
    bias = rng.integers(-(2**24), 2**24, size=channels, dtype=np.int64)
    act = (-32768, 32767) if rng.random() < 0.6 else (int(rng.integers(-32768, 0)), int(rng.integers(1, 32768)))
    return m, s, bias, act


def _both(b: Builder, label: str, ours: str, theirs: str, x, y, scratch: int = 0, x2=None) -> None:
    """One case: the input (and a second one, `in2`) copied to the work buffer, our call, its output, CMSIS-NN's
    call, its output."""
    xs = b.arr("int16_t", x)
    in2 = (2 * x.size + 15) // 16 * 16
    out_off = in2 + (0 if x2 is None else (2 * x2.size + 15) // 16 * 16) + 16
    second = "" if x2 is None else f"copy(work + {in2}, (const int8_t *){b.arr('int16_t', x2)}, {2 * x2.size});"
    call = f"""
    {{
        int16_t *const in = (int16_t *)work, *const out = (int16_t *)(work + {out_off});
        const int16_t *const in2 = (const int16_t *)(work + {in2});
        (void)in2;
        copy(work, (const int8_t *){xs}, {2 * x.size});
        {second}
        status = {ours};
        emit(work + {out_off}, {2 * y.size});
        if (status == MCU_OK && {theirs} != ARM_CMSIS_NN_SUCCESS) {{
            status = MCU_ERR_UNSUPPORTED;
        }}
        emit(work + {out_off}, {2 * y.size});
    }}"""
    expected = y.astype("<i2").reshape(-1).view(np.int8)
    expected = np.concatenate([expected, np.zeros(-expected.size % 4, dtype=np.int8)])  # emit prints whole words
    b.add(Case(label, call, np.concatenate([expected, expected])), out_off + 2 * y.size, scratch)


CONTEXT = "{scratch, (int32_t)sizeof scratch}"  # every call's context: the firmware's whole scratch buffer


def _ours(b: Builder, function: str, params: str, w, m, s, bias) -> tuple[str, tuple[str, str, str, str]]:
    """Our kernel's call on the layer's constants (declared once, their names returned too for CMSIS-NN's)."""
    names = b.arr("int8_t", w), b.arr("int32_t", m), b.arr("int32_t", s), b.arr("int64_t", bias)
    ws, ms, ss, bs = names
    i = len(b.cases)
    b.decls.append(f"static const {function}_params p{i} = {{{params}}};\n")
    return (f"{function}(&(mcu_context){CONTEXT}, &p{i}, &(mcu_per_channel_quant){{{ms}, {ss}}}, in, "
            f"{ws}, {bs}, out)"), names


def linear_case(b: Builder, rng, batch: int, nin: int, nout: int) -> None:
    x, w = _data(rng, (batch, nin)), _weights(rng, (nout, nin))
    m, s, bias, act = _quant(rng, nout, nin, per_channel=False)  # CMSIS-NN's takes one multiplier
    y = linear_s16(x, w, bias, m, s, act_min=act[0], act_max=act[1])
    ours, (ws, _, _, bs) = _ours(b, "mcu_linear_s16", f"{batch}, {nin}, {nout}, {act[0]}, {act[1]}", w, m, s, bias)
    theirs = (f"arm_fully_connected_s16(&(cmsis_nn_context){CONTEXT}, "
              f"&(cmsis_nn_fc_params){{0, 0, 0, {{{act[0]}, {act[1]}}}}}, "
              f"&(cmsis_nn_per_tensor_quant_params){{{int(m[0])}, {int(s[0])}}}, "
              f"&(cmsis_nn_dims){{{batch}, 1, 1, {nin}}}, in, &(cmsis_nn_dims){{{nin}, 1, 1, {nout}}}, {ws}, "
              f"&(cmsis_nn_dims){{1, 1, 1, {nout}}}, {bs}, &(cmsis_nn_dims){{{batch}, 1, 1, {nout}}}, out)")
    _both(b, f"linear_s16 {batch}x{nin}->{nout}", ours, theirs, x, y)


def conv_case(b: Builder, rng, cin: int, cout: int, k: int, stride: int, pad: int, hw: int) -> None:
    oh = (hw + 2 * pad - k) // stride + 1
    x, w = _data(rng, (1, hw, hw, cin)), _weights(rng, (cout, k, k, cin))
    m, s, bias, act = _quant(rng, cout, k * k * cin, per_channel=True)
    y = conv2d_s16(x, w, bias, m, s, stride=(stride, stride), padding=(pad, pad), out_hw=(oh, oh),
                   act_min=act[0], act_max=act[1])
    ours, (ws, ms, ss, bs) = _ours(b, "mcu_conv2d_s16", f"{c_dims(1, hw, hw, cin)}, {c_dims(1, oh, oh, cout)}, {k}, "
                                   f"{k}, {stride}, {stride}, {pad}, {pad}, 1, 1, {act[0]}, {act[1]}", w, m, s, bias)
    theirs = (f"arm_convolve_s16(&(cmsis_nn_context){CONTEXT}, "
              f"&(cmsis_nn_conv_params){{0, 0, {{{stride}, {stride}}}, {{{pad}, {pad}}}, {{1, 1}}, "
              f"{{{act[0]}, {act[1]}}}}}, &(cmsis_nn_per_channel_quant_params){{(int32_t *){ms}, (int32_t *){ss}}}, "
              f"&(cmsis_nn_dims){{1, {hw}, {hw}, {cin}}}, in, &(cmsis_nn_dims){{{cout}, {k}, {k}, {cin}}}, {ws}, "
              f"&(cmsis_nn_dims){{1, 1, 1, {cout}}}, &(cmsis_nn_bias_data){{{bs}, false}}, "
              f"&(cmsis_nn_dims){{1, {oh}, {oh}, {cout}}}, out)")
    _both(b, f"conv2d_s16 {cin}->{cout} {k}x{k}/{stride}", ours, theirs, x, y, scratch=8 * k * k * cin + 256)


def depthwise_case(b: Builder, rng, c: int, ch_mult: int, k: int, stride: int, pad: int, hw: int) -> None:
    oh, oc = (hw + 2 * pad - k) // stride + 1, c * ch_mult
    x, w = _data(rng, (1, hw, hw, c)), _weights(rng, (k, k, oc))
    m, s, bias, act = _quant(rng, oc, k * k, per_channel=True)
    y = depthwise_conv2d_s16(x, w, bias, m, s, ch_mult=ch_mult, stride=(stride, stride), padding=(pad, pad),
                             out_hw=(oh, oh), act_min=act[0], act_max=act[1])
    ours, (ws, ms, ss, bs) = _ours(b, "mcu_depthwise_conv2d_s16", f"{c_dims(1, hw, hw, c)}, {c_dims(1, oh, oh, oc)}, "
                                   f"{ch_mult}, {k}, {k}, {stride}, {stride}, {pad}, {pad}, 1, 1, {act[0]}, {act[1]}",
                                   w, m, s, bias)
    theirs = (f"arm_depthwise_conv_wrapper_s16(&(cmsis_nn_context){CONTEXT}, "
              f"&(cmsis_nn_dw_conv_params){{0, 0, {ch_mult}, {{{stride}, {stride}}}, {{{pad}, {pad}}}, {{1, 1}}, "
              f"{{{act[0]}, {act[1]}}}}}, &(cmsis_nn_per_channel_quant_params){{(int32_t *){ms}, (int32_t *){ss}}}, "
              f"&(cmsis_nn_dims){{1, {hw}, {hw}, {c}}}, in, &(cmsis_nn_dims){{1, {k}, {k}, {oc}}}, {ws}, "
              f"&(cmsis_nn_dims){{1, 1, 1, {oc}}}, {bs}, &(cmsis_nn_dims){{1, {oh}, {oh}, {oc}}}, out)")
    _both(b, f"depthwise_s16 {c}x{ch_mult} {k}x{k}/{stride}", ours, theirs, x, y, scratch=8 * k * k * c + 256)


def add_case(b: Builder, rng, size: int, s_a: float, s_b: float, s_out: float) -> None:
    """tcn's residual sums: arm_elementwise_add_s16 (zero points 0, left shift 15)."""
    x, x2 = _data(rng, (size,)), _data(rng, (size,))
    act = (-32768, 32767) if rng.random() < 0.6 else (int(rng.integers(-32768, 0)), int(rng.integers(1, 32768)))
    prm = add_params(s_a, s_b, s_out, left_shift=15)
    keys = ("a_multiplier", "a_shift", "b_multiplier", "b_shift", "left_shift", "out_multiplier", "out_shift")
    y = add_s16(x, x2, **{k: prm[k] for k in keys}, act_min=act[0], act_max=act[1])
    i = len(b.cases)
    b.decls.append(f"static const mcu_add_s16_params p{i} = {{{size}, {', '.join(str(int(prm[k])) for k in keys)}, "
                   f"{act[0]}, {act[1]}}};\n")
    theirs = (f"arm_elementwise_add_s16(in, in2, 0, {prm['a_multiplier']}, {prm['a_shift']}, 0, {prm['b_multiplier']}, "
              f"{prm['b_shift']}, 15, out, 0, {prm['out_multiplier']}, {prm['out_shift']}, {act[0]}, {act[1]}, {size})")
    _both(b, f"add_s16 {size}", f"mcu_add_s16(&p{i}, in, in2, out)", theirs, x, y, x2=x2)


def mul_case(b: Builder, rng, size: int, s_a: float, s_b: float, s_out: float) -> None:
    """arm_elementwise_mul_s16 (zero points 0)."""
    x, x2 = _data(rng, (size,)), _data(rng, (size,))
    m, sh = mul_params(s_a, s_b, s_out)
    y = mul_s16(x, x2, m, sh)
    i = len(b.cases)
    b.decls.append(f"static const mcu_mul_s16_params p{i} = {{{size}, {m}, {sh}, -32768, 32767}};\n")
    theirs = f"arm_elementwise_mul_s16(in, in2, 0, 0, out, 0, {m}, {sh}, -32768, 32767, {size})"
    _both(b, f"mul_s16 {size}", f"mcu_mul_s16(&p{i}, in, in2, out)", theirs, x, y, x2=x2)


def lstm_case(b: Builder, rng, batch: int, steps: int, features: int, hidden: int, cell_shift: int) -> None:
    """kws_lstm's layer: arm_lstm_unidirectional_s16 (batch major, from the zero state) with one multiplier and
    shift a gate (every row of a gate reaches the gate's largest weight), our gate order (i, f, g, o) split into
    CMSIS-NN's gates, the biases its input products' effective ones (tests/kernels/test_kernels_lstm_s16.py)."""
    rows = 4 * hidden
    w_ih, w_hh = rng.standard_normal((rows, features)) * 0.3, rng.standard_normal((rows, hidden)) * 0.3
    for w in (w_ih, w_hh):
        for k in range(4):
            block = w[k * hidden:(k + 1) * hidden]
            block[:, 0] = np.abs(block).max() * np.where(block[:, 0] < 0, -1, 1)
    p = layer_params(w_ih, w_hh, rng.standard_normal(rows) * 0.3, rng.standard_normal(rows) * 0.3, 2.0 / 32767,
                     1.0 / 32767, cell_shift)
    x = rng.integers(-32768, 32768, size=(batch, steps, features)).astype(np.int16)
    y = lstm_s16(x, p)
    i = len(b.cases)
    wi, wh, bs = b.arr("int8_t", p.w_ih), b.arr("int8_t", p.w_hh), b.arr("int64_t", p.bias)
    qs, zeros = b.arr("int32_t", p.quant), b.arr("int64_t", np.zeros(hidden))
    b.decls.append(f"static const mcu_lstm_s16_params p{i} = {{{batch}, {steps}, {features}, {hidden}, {cell_shift}, "
                   f"{p.forget_mult}, {p.forget_shift}, {p.input_mult}, {p.input_shift}, {p.out_mult}, "
                   f"{p.out_shift}}};\n")
    b.decls.append(f"static int16_t lstm{i}[3][{batch * hidden}];\n")
    gates = []
    for k, act in ((1, "ARM_SIGMOID"), (0, "ARM_SIGMOID"), (2, "ARM_TANH"), (3, "ARM_SIGMOID")):
        q = p.quant[k * hidden]
        gates.append(f"{{{int(q[0])}, {int(q[1])}, {wi} + {k * hidden * features}, {bs} + {k * hidden}, {int(q[2])}, "
                     f"{int(q[3])}, {wh} + {k * hidden * hidden}, {zeros}, NULL, {act}}}")
    b.decls.append(f"static const cmsis_nn_lstm_params c{i} = {{0, {batch}, {steps}, {features}, {hidden}, 0, "
                   f"{p.forget_mult}, {p.forget_shift}, {p.input_mult}, {p.input_shift}, 0, {-cell_shift}, "
                   f"{p.out_mult}, {p.out_shift}, 0, {', '.join(gates)}}};\n")
    theirs = (f"arm_lstm_unidirectional_s16(in, out, &c{i}, &(cmsis_nn_lstm_context){{lstm{i}[0], lstm{i}[1], "
              f"lstm{i}[2], NULL}})")
    ours = f"mcu_lstm_s16(&(mcu_context){CONTEXT}, &p{i}, in, NULL, NULL, {wi}, {wh}, {bs}, {qs}, out)"
    _both(b, f"lstm_s16 {batch}x{steps}x{features}->{hidden}", ours, theirs, x, y,
          scratch=2 * (2 * hidden + features) + 64)


@pytest.mark.slow
@pytest.mark.parametrize("board", ["mps2-an505", "mps2-an386", "mps3-an547"])
def test_s16_kernels_equal_cmsis_nn_on_each_core(board: str) -> None:
    """fc_autoencoder's, ds_cnn's and tcn's layer kinds and odd sizes around the loops' steps (2, 4, 8 and 16
    values), one multiplier (fully connected) or one per channel."""
    root = cmsis_nn_root(CMSIS_S16, "the s16 kernels")
    rng = np.random.default_rng(20261206)
    b = Builder()
    b.decls += ['#include <stdbool.h>\n', '#include "mcu/kernels_s16.h"\n', '#include "arm_nnfunctions.h"\n']
    for batch, nin, nout in [(1, 640, 128), (1, 128, 8), (1, 8, 128), (2, 33, 7), (1, 1, 3), (3, 17, 5),
                             (1, 255, 12), (1, 64, 10)]:
        linear_case(b, rng, batch, nin, nout)
    for cin, cout, k, stride, pad, hw in [(1, 8, 3, 1, 1, 6), (16, 16, 3, 1, 1, 5), (32, 17, 1, 1, 0, 4),
                                          (5, 9, 3, 2, 1, 7), (8, 8, 2, 1, 0, 5)]:
        conv_case(b, rng, cin, cout, k, stride, pad, hw)
    for c, mult, k, stride, pad, hw in [(64, 1, 3, 1, 1, 5), (17, 1, 3, 2, 1, 6), (8, 2, 3, 1, 1, 4),
                                        (4, 1, 5, 1, 2, 5), (12, 1, 3, 1, 0, 6)]:
        depthwise_case(b, rng, c, mult, k, stride, pad, hw)
    for size, s_a, s_b, s_out in [(1, 1e-3, 1e-3, 2e-3), (7, 2e-4, 1e-3, 1e-3), (64, 1e-3, 3e-4, 5e-4),
                                  (257, 5e-4, 5e-4, 4e-4)]:
        add_case(b, rng, size, s_a, s_b, s_out)
        mul_case(b, rng, size, s_a, s_b, s_a * s_b * 2**12)
    for batch, steps, features, hidden, cell_shift in [(1, 6, 40, 32, 11), (2, 3, 5, 9, 15), (1, 4, 17, 4, 8)]:
        lstm_case(b, rng, batch, steps, features, hidden, cell_shift)
    got = run_cases(b, KERNELS, f"test_s16_cmsis_{board}", extra_sources=[root / "Source" / f for f in CMSIS_S16],
                    extra_includes=[root / "Include"], board_name=board)
    for i, case in enumerate(b.cases):
        assert_case(i, case, got)
