"""Hypothesis strategies and data for the int8 kernels' property tests: zero-points, multipliers and
shifts with their extremes, activation bounds, int8 data in several distributions, weights, biases,
per-channel requantization, convolution, binary and pooling cases, and the runners that check one case
of a binary or pooling kernel (through cbind_s8) against the bit-exact Python reference."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import cbind_s8 as cb
from cbind import MCU_OK
from mcu.reference import arith
from mcu.reference import elementwise, pool
from mcu.reference.elementwise import broadcast_params


EXACT = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


FLOAT = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


zero_points = st.one_of(st.sampled_from([-128, 127, 0, -1]), st.integers(-128, 127))


multipliers = st.one_of(st.sampled_from([0, 2**30, 2**31 - 1]), st.integers(2**30, 2**31 - 1))


shifts = st.one_of(st.sampled_from([-31, 30, 0]), st.integers(-31, 30), st.integers(-20, 2))


@st.composite
def act_bounds(draw):
    kind = draw(st.sampled_from(["full", "full", "full", "relu", "random", "point", "ends"]))
    if kind == "full":
        return -128, 127
    if kind == "relu":
        return draw(zero_points), 127
    if kind == "point":
        v = draw(st.integers(-128, 127))
        return v, v
    if kind == "ends":
        return draw(st.sampled_from([(-128, -128), (127, 127), (-128, -127), (126, 127)]))
    lo, hi = sorted((draw(st.integers(-128, 127)), draw(st.integers(-128, 127))))
    return lo, hi


def int8_data(rng: np.random.Generator, shape, mode: str) -> np.ndarray:
    if mode == "uniform":
        return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
    if mode == "extremes":
        return rng.choice(np.array([-128, 127], dtype=np.int8), size=shape)
    if mode == "mixed":
        x = rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
        mask = rng.random(shape) < 0.3
        x[mask] = rng.choice(np.array([-128, 127], dtype=np.int8), size=int(mask.sum()))
        return x
    if mode == "low":
        return np.full(shape, -128, dtype=np.int8)
    return np.full(shape, 127, dtype=np.int8)


data_modes = st.sampled_from(["uniform", "uniform", "uniform", "mixed", "mixed", "extremes", "low", "high"])


def weights(rng, shape, mode):
    if mode == "full":
        return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
    if mode == "extremes":
        return rng.choice(np.array([-127, 127, -128], dtype=np.int8), size=shape)
    return rng.integers(-127, 128, size=shape, dtype=np.int64).astype(np.int8)


weight_modes = st.sampled_from(["symmetric", "symmetric", "full", "extremes"])


def per_channel(rng, channels, center_shift, kind):
    """Per-channel multipliers across [2^30, 2^31-1] (some 0 and the ends) and shifts around a centre."""
    m = rng.integers(2**30, 2**31, size=channels, dtype=np.int64)
    special = rng.random(channels)
    m[special < 0.1] = 0
    m[(special >= 0.1) & (special < 0.2)] = 2**30
    m[(special >= 0.2) & (special < 0.3)] = 2**31 - 1
    if kind == "same":
        s = np.full(channels, center_shift, dtype=np.int64)
    else:
        s = np.clip(center_shift + rng.integers(-4, 5, size=channels), -31, 30)
    return m.astype(np.int32), s.astype(np.int32)


def biases(rng, channels, kind):
    if kind == "none":
        return None
    if kind == "small":
        return rng.integers(-(2**16), 2**16, size=channels, dtype=np.int64).astype(np.int32)
    # full int32 range: exercises the modulo-2^32 accumulator
    b = rng.integers(-(2**31), 2**31, size=channels, dtype=np.int64)
    b[: channels // 2] = rng.choice([-(2**31), 2**31 - 1], size=channels // 2)
    return b.astype(np.int32)


bias_kinds = st.sampled_from(["none", "small", "small", "small", "full"])


# None: a shift that maps the typical accumulator of the layer to about +-50
# (so most outputs are neither saturated nor zero); otherwise that many steps
# away from it, or anything in [-31, 30] (saturation, zero outputs).
conv_shift_centres = st.one_of(st.none(), st.none(), st.integers(-3, 3), st.integers(-31, 30))


def shift_for(centre, taps: int) -> int:
    """Shift centre for accumulators of `taps` products of uniform int8 values (std ~74 * 74 * sqrt(taps))."""
    auto = int(round(math.log2(50 / (74 * 74 * math.sqrt(taps))))) + 1
    if centre is None:
        return auto
    if -3 <= centre <= 3:
        return int(np.clip(auto + centre, -31, 30))
    return centre


def assert_equal(c_out, r_out):
    c_out, r_out = np.asarray(c_out), np.asarray(r_out)
    assert c_out.shape == r_out.shape, (c_out.shape, r_out.shape)
    if not np.array_equal(c_out, r_out):
        bad = np.argwhere(c_out != r_out)
        i = tuple(bad[0])
        raise AssertionError(f"{len(bad)} of {c_out.size} differ; first at {i}: C {c_out[i]}, reference {r_out[i]}")


@st.composite
def conv_cases(draw, depthwise=False):
    if depthwise:
        groups, icg, ocg = 1, 1, 1
        channels = draw(st.integers(1, 8))
        ch_mult = draw(st.integers(1, 3))
    else:
        groups = draw(st.integers(1, 3))
        icg = draw(st.integers(1, 5))
        ocg = draw(st.integers(1, 4))
        channels = ch_mult = None
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pl = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    extra_b, extra_r = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    min_h = max(1, dh * (kh - 1) + 1 - pt - (pt + extra_b))
    min_w = max(1, dw * (kw - 1) + 1 - pl - (pl + extra_r))
    h = draw(st.integers(min_h, min_h + 7))
    w = draw(st.integers(min_w, min_w + 7))
    out_h = (h + pt + pt + extra_b - dh * (kh - 1) - 1) // sh + 1
    out_w = (w + pl + pl + extra_r - dw * (kw - 1) - 1) // sw + 1
    return dict(
        n=draw(st.integers(1, 2)), h=h, w=w, groups=groups, icg=icg, ocg=ocg, channels=channels,
        ch_mult=ch_mult, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pt, pl=pl, out_h=out_h, out_w=out_w,
        in_zp=draw(zero_points), out_zp=draw(zero_points), act=draw(act_bounds()), bias=draw(bias_kinds),
        shift=draw(conv_shift_centres), per_channel=draw(st.sampled_from(["same", "varied"])),
        data=draw(data_modes), wmode=draw(weight_modes), seed=draw(st.integers(0, 2**32 - 1)),
    )


@st.composite
def binary_cases(draw, op):
    rank = draw(st.integers(1, 5))
    out_shape = [draw(st.integers(1, 5)) for _ in range(rank)]
    a_shape = [d if draw(st.integers(0, 3)) else 1 for d in out_shape]
    b_shape = [d if draw(st.integers(0, 3)) else 1 for d in out_shape]
    # numpy-style: the broadcast operand may also have fewer dims
    a_shape = a_shape[draw(st.integers(0, rank - 1)) if draw(st.booleans()) else 0:]
    b_shape = b_shape[draw(st.integers(0, rank - 1)) if draw(st.booleans()) else 0:]
    kind = draw(st.sampled_from(["tflite", "tflite", "random"]))
    zp_a, zp_b, zp_out = draw(zero_points), draw(zero_points), draw(zero_points)
    if kind == "tflite":
        s_a, s_b = draw(st.floats(1e-3, 1.0)), draw(st.floats(1e-3, 1.0))
        base = s_a * s_b * 128 if op == "mul" else s_a + s_b
        scales = [s_a, s_b, base * draw(st.floats(0.2, 3.0))]
        helper = arith.mul_params if op == "mul" else arith.add_params
        qp = helper(*scales, zp_a=zp_a, zp_b=zp_b, zp_out=zp_out)
    else:
        qp = dict(a_offset=-zp_a, b_offset=-zp_b, a_multiplier=draw(multipliers), a_shift=draw(shifts),
                  b_multiplier=draw(multipliers), b_shift=draw(shifts), left_shift=draw(st.integers(0, 23)),
                  out_multiplier=draw(multipliers), out_shift=draw(shifts), output_offset=zp_out)
    act = draw(act_bounds())
    qp.update(act_min=act[0], act_max=act[1])
    return dict(a_shape=a_shape, b_shape=b_shape, qp=qp, data=draw(data_modes), seed=draw(st.integers(0, 2**32 - 1)),
                use_strides=draw(st.booleans()))


def run_binary(op, case):
    rng = np.random.default_rng(case["seed"])
    a = int8_data(rng, case["a_shape"], case["data"])
    b = int8_data(rng, case["b_shape"], "uniform")
    bp = broadcast_params(a.shape, b.shape)
    params = dict(case["qp"], **bp)
    status, out = cb.binary(op, a, b, params)
    assert status == MCU_OK
    fn = getattr(elementwise, f"{op}_s8")
    expected = fn(a, b, **params) if case["use_strides"] else fn(a, b, **case["qp"])
    assert_equal(out.reshape(expected.shape), expected)


@st.composite
def pool_cases(draw):
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pt, pl = draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1))
    h, w = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    # Any output size whose windows all hold a real position.
    max_oh = (h + pt - 1) // sh + 1
    max_ow = (w + pl - 1) // sw + 1
    out_h = draw(st.integers(1, max_oh))
    out_w = draw(st.integers(1, max_ow))
    return dict(n=draw(st.integers(1, 2)), c=draw(st.integers(1, 6)), h=h, w=w, kh=kh, kw=kw, sh=sh, sw=sw,
                pt=pt, pl=pl, out_h=out_h, out_w=out_w, act=draw(act_bounds()), data=draw(data_modes),
                seed=draw(st.integers(0, 2**32 - 1)))


@st.composite
def pool1d_cases(draw):
    """Windows one row high (MaxPool1d over [N, 1, L, C] or any 1xk pool): two taps most often, channel
    counts around multiples of 4 (the DSP path's lanes and their scalar tail), any rows, strides, left pads."""
    kw = draw(st.one_of(st.just(2), st.integers(1, 5)))
    sw, pl = draw(st.integers(1, 3)), draw(st.integers(0, kw - 1))
    h, w = draw(st.integers(1, 3)), draw(st.integers(1, 24))
    sh = draw(st.integers(1, 2))
    out_h = draw(st.integers(1, (h - 1) // sh + 1))
    out_w = draw(st.integers(1, (w + pl - 1) // sw + 1))
    c = draw(st.one_of(st.integers(1, 9), st.sampled_from([12, 16, 31, 32, 33, 64])))
    return dict(n=draw(st.integers(1, 2)), c=c, h=h, w=w, kh=1, kw=kw, sh=sh, sw=sw, pt=0, pl=pl, out_h=out_h,
                out_w=out_w, act=draw(act_bounds()), data=draw(data_modes), seed=draw(st.integers(0, 2**32 - 1)))


def run_pool1d(case):
    """mcu_max_pool1d_s8 against the max pooling reference (mcu.reference.pool.max_pool2d_s8)."""
    rng = np.random.default_rng(case["seed"])
    x = int8_data(rng, (case["n"], case["h"], case["w"], case["c"]), case["data"])
    params = dict(input=x.shape, output=(case["n"], case["out_h"], case["out_w"], case["c"]), kernel_h=1,
                  kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=0,
                  pad_left=case["pl"], act_min=case["act"][0], act_max=case["act"][1])
    status, out = cb.max_pool1d(x, params)
    assert status == MCU_OK
    assert_equal(out, pool.max_pool2d_s8(x, **params))


def run_pool(op, case):
    rng = np.random.default_rng(case["seed"])
    x = int8_data(rng, (case["n"], case["h"], case["w"], case["c"]), case["data"])
    params = dict(input=x.shape, output=(case["n"], case["out_h"], case["out_w"], case["c"]), kernel_h=case["kh"],
                  kernel_w=case["kw"], stride_h=case["sh"], stride_w=case["sw"], pad_top=case["pt"],
                  pad_left=case["pl"], act_min=case["act"][0], act_max=case["act"][1])
    status, out = cb.pool2d(op, x, params)
    assert status == MCU_OK
    assert_equal(out, getattr(pool, f"{op}_pool2d_s8")(x, **params))
