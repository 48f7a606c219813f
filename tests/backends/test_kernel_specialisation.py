"""Per-model specialisation of mcu_conv2d_packed_s8 (mcu/backends/optimized/specialise.py).

The definitions computed from the reference models' packed layers; the kernel built with a narrower
MCU_PIXEL_WIDE_TAPS (24, 152) bit-exact with the Python reference on the Cortex-M33 for windows below,
at and above the limit, with the loop (MCU_PACKED_LOOP 1) or, without it, MCU_ERR_UNSUPPORTED for the
wider windows and still exact results below; MCU_PACKED_NARROW 0 refusing a narrow layer, the speed paths
left out (pairs, four pixels) leaving their layers exact; and the exported library carrying the definitions in
its CMake and Makefile fragments and building with them, without the paths its layers do not take.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from mcu.backends.optimized import tuned
from mcu.backends.optimized.specialise import PackedLayer, merge_defines, packed_defines
from mcu.backends.portable.conv import S4_STREAM, S4_WIDE, s4_merge_defines
from mcu.device.boards import load_board
from mcu.commands.export import export_library
from mcu.paths import runtime_dir, kernel_source, kernels_dir
from mcu.reference.conv import conv2d_s8
from packed_cases import packed_firmware_source, packed_params
from repo import requires_qemu

# The definitions of a build whose packed layers take no path but the straight-line dot product of 8 taps; _defines
# names the others' (MCU_ left out)
NONE = {"MCU_PIXEL_WIDE_TAPS": 8, "MCU_PACKED_LOOP": 0, "MCU_PACKED_WINDOWS": 0, "MCU_PACKED_NARROW": 0,
        "MCU_PACKED_NARROW_K3C3": 0, "MCU_PACKED_NARROW_CLAMP": 0, "MCU_PACKED_NARROW_FULL": 0,
        "MCU_PACKED_PW_GROUP_TAPS": 0, "MCU_PACKED_BYTES": 0, "MCU_PIXEL4_GROUP": 1, "MCU_PACKED_PW8": 0,
        "MCU_PACKED_PW_PAIRS": 0, "MCU_PACKED_QUADS": 0, "MCU_PACKED_SCALED": 0, "MCU_PACKED_NARROW_ROWS": 0,
        "MCU_PACKED_PW8_REGS": 0, "MCU_PACKED_PW_SMALL": 0, "MCU_PACKED_PW3_TAPS": 0, "MCU_PACKED_PW8_16": 0,
        "MCU_PACKED_ROWS_COUT": 0, "MCU_PWS_Q16_COUT": 0, "MCU_PWS_Q32_COUT": 0, "MCU_PACKED_NARROW_PARTS": 0,
        "MCU_PACKED_PW4_TAPS": 0, "MCU_PW4_COUT": 0, "MCU_PW4_KP_MAX": 0}


def _defines(**paths: int) -> dict[str, int]:
    assert all(f"MCU_{k}" in NONE for k in paths), paths
    return {**NONE, **{f"MCU_{k}": v for k, v in paths.items()}}


# The reference models on mps2-an505 (int8, zero wait states: no pointwise groups): their packed layers' widest
# window and paths; none has a narrow layer whose range is narrower than int8 (no clamped narrow engine)
NARROW = {"PACKED_NARROW": 1, "PACKED_NARROW_FULL": 1}
EXPECTED = {
    # a windowed layer's stream of 9.9 kB (16 -> 32 channels, 3x3): four pixels; its classifier one row
    "small_cnn": _defines(PIXEL_WIDE_TAPS=144, PACKED_WINDOWS=1, PACKED_QUADS=1, **NARROW),
    # its ReLU pointwise layers' streams scaled (tuned.takes_scaled)
    "ds_cnn": _defines(PIXEL_WIDE_TAPS=64, PACKED_PW_PAIRS=1, PACKED_SCALED=1, **NARROW),
    # 3x3 RGB first layer at stride 2 (its widened rows); the 8->16 pointwise layer (scaled, its column in registers,
    # 16 channels out: mcu_pw8_16_regs); the 16->32, 32->32 and 32->64 ones (scaled, streams of 1.7 to 5.4 kB:
    # pw_small_s8_dsp.h, the quads' bytes at immediate offsets for 32 channels out, the 32 -> 32 layer's count over the
    # 32 -> 64 one's 12 x 12 pixels); the 3 x 3 ones by three pixels, 9 x 256 taps (pw3_s8_dsp.h)
    "mobilenet_v1": _defines(PIXEL_WIDE_TAPS=256, PACKED_NARROW_K3C3=1, PACKED_NARROW_ROWS=1, PACKED_ROWS_COUT=8,
                             PACKED_PW8=1, PACKED_PW_PAIRS=1, PACKED_SCALED=1, PACKED_PW8_16=1, PACKED_PW_SMALL=1,
                             PACKED_PW3_TAPS=2304, PWS_Q16_COUT=32, PWS_Q32_COUT=32, **NARROW),
    # windows over 256 taps: the loop; no flat pointwise layer (its shortcuts are strided)
    "resnet8": _defines(PIXEL_WIDE_TAPS=256, PACKED_LOOP=1, PACKED_WINDOWS=1, PACKED_NARROW_K3C3=1, PACKED_QUADS=1,
                        **NARROW),
    "fc_autoencoder": _defines(PIXEL_WIDE_TAPS=256, PACKED_LOOP=1, **NARROW),  # rows: no pairs
}
# On mps2-an505-u575 the weights wait (flash, 4 wait states a miss): ds_cnn's 64->64 pointwise streams of 9.5 kB
# run in groups of pairs (its 64->12 fully connected stream, 1.8 kB, fits the cache: int16, no byte path);
# fc_autoencoder's eight layers of 35 to 166 kB streams take the byte stream, its 128->8 and 8->128 ones (2.2 and
# 4.6 kB) the int16 pairs
EXPECTED_WAIT = {
    # its 10x4 first layer's 6,400 B stream over a way of the U575's ICACHE: pixels by parts of it
    "ds_cnn": {**EXPECTED["ds_cnn"], "MCU_PACKED_PW_GROUP_TAPS": 2736, "MCU_PACKED_NARROW_PARTS": 1},
    "resnet8": {**EXPECTED["resnet8"], "MCU_PIXEL4_GROUP": 4},  # 19 to 74 kB windowed streams: four-pixel units in groups
    "fc_autoencoder": _defines(PIXEL_WIDE_TAPS=128, PACKED_BYTES=1, **NARROW),
}


def _layer(kp: int, cout: int = 8, right: bool = True, act_min: int = -128, k3c3: bool = False,
           output_offset: int = -128, pointwise: bool = False, flat: bool = False, pixels: int = 1,
           group: bool = False, bytes: bool = False, act_max: int = 127, cin4: bool = True,
           rows: bool = False, scaled: bool = False) -> PackedLayer:
    return PackedLayer(kp=kp, cout=cout, act_min=act_min, output_offset=output_offset, right=right, k3c3=k3c3,
                       pointwise=pointwise, flat=flat, pixels=pixels, group=group, bytes=bytes, act_max=act_max,
                       cin4=cin4, rows=rows, scaled=scaled)


def test_defines_from_layers() -> None:
    assert packed_defines([]) == {}
    assert packed_defines([_layer(12), _layer(140)]) == _defines(PIXEL_WIDE_TAPS=144, PACKED_WINDOWS=1, **NARROW)
    # wider than 256: the loop, and the straight-line part at its full size
    assert packed_defines([_layer(260)])["MCU_PIXEL_WIDE_TAPS"] == 256
    assert packed_defines([_layer(260)])["MCU_PACKED_LOOP"] == 1
    # a stream the C blocks run (left shifts) or fewer than 4 channels never reach the assembly
    assert packed_defines([_layer(600, right=False), _layer(40, cout=3)]) == NONE
    # windowed loops: a layer neither flat pointwise nor narrow; flat pointwise layers never need them
    assert packed_defines([_layer(64, pointwise=True, flat=True)])["MCU_PACKED_WINDOWS"] == 0
    assert packed_defines([_layer(64, pointwise=True)])["MCU_PACKED_WINDOWS"] == 1  # e.g. stride 2
    # narrow: few taps, whole blocks, an activation at or above the output offset
    assert packed_defines([_layer(48)])["MCU_PACKED_NARROW"] == 1
    assert packed_defines([_layer(52)])["MCU_PACKED_NARROW"] == 0
    assert packed_defines([_layer(28, cout=6)])["MCU_PACKED_NARROW"] == 0
    assert packed_defines([_layer(28, act_min=-5, output_offset=0)])["MCU_PACKED_NARROW"] == 0  # floor < offset
    assert packed_defines([_layer(28, k3c3=True)])["MCU_PACKED_NARROW_K3C3"] == 1
    # the widened rows of such windows at stride 2 across (their call's frame): only where a layer takes them
    assert packed_defines([_layer(28, k3c3=True)])["MCU_PACKED_NARROW_ROWS"] == 0
    assert packed_defines([_layer(28, k3c3=True, rows=True)])["MCU_PACKED_NARROW_ROWS"] == 1
    # their stores at fixed offsets where all of them have one output depth
    assert packed_defines([_layer(28, k3c3=True)])["MCU_PACKED_ROWS_COUT"] == 0
    assert packed_defines([_layer(28, k3c3=True, rows=True)])["MCU_PACKED_ROWS_COUT"] == 8
    assert packed_defines([_layer(28, k3c3=True, rows=True), _layer(28, cout=16, k3c3=True)])["MCU_PACKED_ROWS_COUT"] == 8
    assert packed_defines([_layer(28, k3c3=True, rows=True),
                           _layer(28, cout=16, k3c3=True, rows=True)])["MCU_PACKED_ROWS_COUT"] == 0
    # pointwise layers of 16 taps or more take the two-pixel loops (MCU_NARROW_PW_MIN), fewer stay narrow
    assert packed_defines([_layer(16, pointwise=True), _layer(48, pointwise=True)])["MCU_PACKED_NARROW"] == 0
    assert packed_defines([_layer(12, pointwise=True)])["MCU_PACKED_NARROW"] == 1
    assert packed_defines([_layer(8, pointwise=True, flat=True, pixels=2)])["MCU_PACKED_NARROW"] == 0  # pw8
    assert packed_defines([_layer(8, pointwise=True, flat=True, pixels=1)])["MCU_PACKED_NARROW"] == 1  # one row
    # flat pointwise layers of 8 taps, two pixels or more: every pair in one call (mcu_pw8_pairs)
    assert packed_defines([_layer(8, pointwise=True, flat=True, pixels=2)])["MCU_PACKED_PW8"] == 1
    assert packed_defines([_layer(8, pointwise=True, flat=True, pixels=1)])["MCU_PACKED_PW8"] == 0
    assert packed_defines([_layer(12, pointwise=True, flat=True, pixels=2)])["MCU_PACKED_PW8"] == 0
    assert packed_defines([_layer(8, cout=6, pointwise=True, flat=True, pixels=2)])["MCU_PACKED_PW8"] == 0
    assert packed_defines([_layer(8, pointwise=True, pixels=2)])["MCU_PACKED_PW8"] == 0  # strided: windows
    assert merge_defines([packed_defines([_layer(8, pointwise=True, flat=True, pixels=2)]),
                          packed_defines([_layer(24)])])["MCU_PACKED_PW8"] == 1
    # ... of them, scaled streams stored whole, 8 channels out or a multiple: each pair's column in registers; 16
    # channels out all straight-line (mcu_pw8_16_regs), the others two blocks a pass (mcu_pw8_regs)
    pw8 = {"kp": 8, "pointwise": True, "flat": True, "pixels": 2}
    for cout, regs, c16 in ((24, 1, 0), (8, 1, 0), (16, 0, 1)):
        assert packed_defines([_layer(**pw8, cout=cout, scaled=True)])["MCU_PACKED_PW8_REGS"] == regs
        assert packed_defines([_layer(**pw8, cout=cout, scaled=True)])["MCU_PACKED_PW8_16"] == c16
    for path in ("MCU_PACKED_PW8_REGS", "MCU_PACKED_PW8_16"):
        assert packed_defines([_layer(**pw8, cout=16)])[path] == 0
        assert packed_defines([_layer(**pw8, cout=12, scaled=True)])[path] == 0
        assert packed_defines([_layer(**pw8, cout=16, scaled=True, act_max=100)])[path] == 0
        assert packed_defines([_layer(**pw8, cout=24, scaled=True, act_max=100)])[path] == 0
        assert packed_defines([_layer(**{**pw8, "pixels": 1}, cout=16, scaled=True)])[path] == 0
    # flat pointwise pairs of 16 or 32 taps, scaled streams stored whole, no larger than 8192 B where the weights wait
    # behind a flash cache (FLAG_GROUP): one assembly each
    for kp in (16, 32):
        pws = {"kp": kp, "pointwise": True, "flat": True, "pixels": 2}
        assert packed_defines([_layer(**pws, cout=64, scaled=True)])["MCU_PACKED_PW_SMALL"] == 1
        assert packed_defines([_layer(**pws, cout=64)])["MCU_PACKED_PW_SMALL"] == 0
        assert packed_defines([_layer(**pws, cout=64, scaled=True, act_max=100)])["MCU_PACKED_PW_SMALL"] == 0
        assert packed_defines([_layer(**{**pws, "pixels": 1}, cout=64, scaled=True)])["MCU_PACKED_PW_SMALL"] == 0
    # the quads' output count: the layer of the most outputs among those of two pairs or more; methods that differ: any
    quads = [_layer(32, cout=c, pointwise=True, flat=True, pixels=p, scaled=True) for c, p in ((64, 144), (32, 576))]
    assert packed_defines(quads)["MCU_PWS_Q32_COUT"] == 32
    assert packed_defines(quads)["MCU_PWS_Q16_COUT"] == 0
    assert packed_defines([_layer(16, cout=40, pointwise=True, flat=True, pixels=2, scaled=True)])[
        "MCU_PWS_Q16_COUT"] == 0  # one pair: no quad
    assert merge_defines([packed_defines(quads[:1]), packed_defines([_layer(24)])])["MCU_PWS_Q32_COUT"] == 64
    assert merge_defines([packed_defines(quads[:1]), packed_defines(quads[1:])])["MCU_PWS_Q32_COUT"] == 0
    assert packed_defines([_layer(16, cout=96, pointwise=True, flat=True, pixels=2, scaled=True)])[
        "MCU_PACKED_PW_SMALL"] == 1  # 4,992 B
    assert packed_defines([_layer(32, cout=128, pointwise=True, flat=True, pixels=2, scaled=True, group=True)])[
        "MCU_PACKED_PW_SMALL"] == 0  # 10,752 B
    assert packed_defines([_layer(32, cout=128, pointwise=True, flat=True, pixels=2, scaled=True)])[
        "MCU_PACKED_PW_SMALL"] == 1
    assert packed_defines([_layer(16, cout=96, pointwise=True, flat=True, pixels=2, scaled=True, group=True)])[
        "MCU_PACKED_PW_SMALL"] == 1
    assert packed_defines([_layer(24, cout=16, pointwise=True, flat=True, pixels=2, scaled=True)])[
        "MCU_PACKED_PW_SMALL"] == 0
    # flat pointwise layers whose stream outgrows the flash cache (cout * (2 kp + 20) > 8192 B), that have
    # two pairs to share it and whose weights wait (FLAG_GROUP): room for 18 pairs of 64 taps
    big = _layer(64, cout=64, pointwise=True, flat=True, pixels=4, group=True)
    assert packed_defines([big])["MCU_PACKED_PW_GROUP_TAPS"] == 2736
    assert packed_defines([_layer(64, cout=64, pointwise=True, flat=True, pixels=4)])["MCU_PACKED_PW_GROUP_TAPS"] == 0
    assert packed_defines([_layer(64, cout=52, pointwise=True, flat=True, pixels=4, group=True)])[
        "MCU_PACKED_PW_GROUP_TAPS"] == 0
    assert packed_defines([_layer(64, cout=64, pointwise=True, flat=True, pixels=3, group=True)])[
        "MCU_PACKED_PW_GROUP_TAPS"] == 0
    assert packed_defines([_layer(64, cout=64, pointwise=True, pixels=4, group=True)])["MCU_PACKED_PW_GROUP_TAPS"] == 0
    # a byte stream runs its own loop: none of the paths above
    assert packed_defines([_layer(600, pointwise=True, flat=True, bytes=True)]) == _defines(PACKED_BYTES=1)
    assert merge_defines([packed_defines([big]), packed_defines([_layer(24)])])["MCU_PACKED_PW_GROUP_TAPS"] == 2736
    # windowed layers over 256 taps whose streams outgrow the flash cache, eight pixels or more: four-pixel
    # units in groups of four where the weights wait; not without the loop (a window of 256 taps or less), nor
    # for fewer pixels, nor where the weights read without wait states
    quads = _layer(288, cout=32, pixels=8, group=True)
    assert packed_defines([quads])["MCU_PIXEL4_GROUP"] == 4
    assert packed_defines([_layer(288, cout=32, pixels=8)])["MCU_PIXEL4_GROUP"] == 1
    assert packed_defines([_layer(288, cout=32, pixels=7, group=True)])["MCU_PIXEL4_GROUP"] == 1
    assert packed_defines([_layer(256, cout=32, pixels=64, group=True)])["MCU_PIXEL4_GROUP"] == 1
    assert packed_defines([_layer(288, cout=12, pixels=64, group=True)])["MCU_PIXEL4_GROUP"] == 1  # 7 kB: cached
    assert merge_defines([packed_defines([quads]), packed_defines([_layer(24)])])["MCU_PIXEL4_GROUP"] == 4
    # wider layers: room for all their pairs up to 18, at most 18 pairs of 128 taps
    assert packed_defines([_layer(128, cout=64, pointwise=True, flat=True, pixels=36, group=True)])[
        "MCU_PACKED_PW_GROUP_TAPS"] == 5040
    assert packed_defines([_layer(256, cout=64, pointwise=True, flat=True, pixels=9, group=True)])[
        "MCU_PACKED_PW_GROUP_TAPS"] == 2736
    assert packed_defines([_layer(640, cout=64, pointwise=True, flat=True, pixels=36, group=True)])[
        "MCU_PACKED_PW_GROUP_TAPS"] == 5040
    # three-pixel blocks: flat scaled layers whose range is all of int8, 3 to 9 pixels by threes, 32 taps a step;
    # room for the widest one's columns, across methods too
    pw3 = {"pointwise": True, "flat": True, "scaled": True}
    assert packed_defines([_layer(256, cout=64, pixels=9, **pw3), _layer(128, cout=64, pixels=6, **pw3)])[
        "MCU_PACKED_PW3_TAPS"] == 2304
    assert packed_defines([_layer(96, cout=8, pixels=3, **pw3)])["MCU_PACKED_PW3_TAPS"] == 288
    for other in (_layer(256, cout=64, pixels=8, **pw3), _layer(256, cout=64, pixels=12, **pw3),
                  _layer(48, cout=64, pixels=9, **pw3), _layer(256, cout=64, pixels=9, act_max=100, **pw3),
                  _layer(256, cout=64, pixels=9, pointwise=True, flat=True)):
        assert packed_defines([other])["MCU_PACKED_PW3_TAPS"] == 0
    assert merge_defines([packed_defines([_layer(96, cout=8, pixels=3, **pw3)]),
                          packed_defines([_layer(24)])])["MCU_PACKED_PW3_TAPS"] == 288
    # four-pixel blocks: as the triples over 12 to 36 pixels by fours, where the pairs group (their buffer); their
    # one output count across methods
    pw4 = {**pw3, "group": True}
    assert packed_defines([_layer(128, cout=128, pixels=36, **pw4), _layer(64, cout=128, pixels=36, **pw4)])[
        "MCU_PACKED_PW4_TAPS"] == 4608
    assert packed_defines([_layer(128, cout=128, pixels=36, **pw4)])["MCU_PW4_COUT"] == 128
    assert packed_defines([_layer(64, cout=128, pixels=12, **pw4), _layer(128, cout=64, pixels=16, **pw4)])[
        "MCU_PW4_COUT"] == 0
    for other in (_layer(128, cout=64, pixels=8, **pw4), _layer(128, cout=64, pixels=40, **pw4),
                  _layer(128, cout=64, pixels=30, **pw4), _layer(48, cout=64, pixels=36, **pw4),
                  _layer(128, cout=64, pixels=36, act_max=100, **pw4), _layer(128, cout=128, pixels=36, **pw3),
                  _layer(256, cout=64, pixels=36, **pw4)):
        assert packed_defines([other])["MCU_PACKED_PW4_TAPS"] == 0
    assert merge_defines([packed_defines([_layer(64, cout=128, pixels=12, **pw4)]),
                          packed_defines([_layer(24)])])["MCU_PW4_COUT"] == 128
    # their widest taps (one pass of the loop up to 128, passes in a loop beyond), the widest across methods
    assert packed_defines([_layer(128, cout=128, pixels=36, **pw4), _layer(64, cout=128, pixels=36, **pw4)])[
        "MCU_PW4_KP_MAX"] == 128
    assert packed_defines([_layer(64, cout=128, pixels=12, **pw4), _layer(256, cout=8)])["MCU_PW4_KP_MAX"] == 64
    assert merge_defines([packed_defines([_layer(64, cout=128, pixels=12, **pw4)]),
                          packed_defines([_layer(160, cout=64, pixels=12, **pw4)]),
                          packed_defines([_layer(24)])])["MCU_PW4_KP_MAX"] == 160
    # the speed paths a model's layers take, each built only where one does (1) and left out otherwise (0)
    def paths(*layers: PackedLayer) -> tuple[int, ...]:
        d = packed_defines(layers)
        return tuple(d[k] for k in ("MCU_PACKED_PW_PAIRS", "MCU_PACKED_QUADS", "MCU_PACKED_NARROW_CLAMP",
                                    "MCU_PACKED_NARROW_FULL"))
    # flat pointwise pairs: two pixels or more of whole input words, whole blocks, wide enough to leave the
    # narrow path; 8 channels too (mcu_pw8_pairs falls back on them)
    assert paths(_layer(32, pointwise=True, flat=True, pixels=2)) == (1, 0, 0, 0)
    assert paths(_layer(8, pointwise=True, flat=True, pixels=2)) == (1, 0, 0, 0)
    assert paths(_layer(32, pointwise=True, flat=True, pixels=1))[0] == 0  # a fully connected row
    assert paths(_layer(32, cout=10, pointwise=True, flat=True, pixels=2))[0] == 0  # a partial block
    assert paths(_layer(32, pointwise=True, flat=True, pixels=2, cin4=False))[0] == 0  # 30 channels: windows
    assert packed_defines([_layer(32, pointwise=True, flat=True, pixels=2, cin4=False)])["MCU_PACKED_WINDOWS"] == 1
    assert paths(_layer(12, pointwise=True, flat=True, pixels=2))[0] == 0  # narrow
    assert paths(_layer(32, pointwise=True, pixels=4))[0] == 0  # strided: windows
    # four pixels: a windowed stream over 8 kB (32 x (2 x 144 + 20) B), four pixels or more
    assert paths(_layer(144, cout=32, pixels=4)) == (0, 1, 0, 0)
    assert paths(_layer(144, cout=24, pixels=4))[1] == 0  # 7.4 kB
    assert paths(_layer(144, cout=32, pixels=3))[1] == 0
    assert paths(_layer(144, cout=32, pixels=4, pointwise=True, flat=True))[1] == 0  # flat: no windows
    # the narrow engines: clamped stores for a range narrower than int8, whole bytes for the others
    assert paths(_layer(12, act_max=100)) == (0, 0, 1, 0)
    assert paths(_layer(12, act_min=-100, output_offset=-100)) == (0, 0, 1, 0)
    assert paths(_layer(12), _layer(24, act_max=6)) == (0, 0, 1, 1)
    assert paths(_layer(60, act_max=100)) == (0, 0, 0, 0)  # not narrow: the general path clamps
    assert merge_defines([packed_defines([_layer(12, act_max=100)]),
                          packed_defines([_layer(32, pointwise=True, flat=True, pixels=2)])])["MCU_PACKED_NARROW_CLAMP"] == 1
    merged = merge_defines([packed_defines([_layer(24)]), {}, packed_defines([_layer(100), _layer(28, k3c3=True)])])
    assert merged == _defines(PIXEL_WIDE_TAPS=104, PACKED_WINDOWS=1, PACKED_NARROW_K3C3=1, **NARROW)
    # the rows layers' one output depth across methods: kept where they agree, 0 (any depth) where they do not
    rows8, rows16 = _layer(28, k3c3=True, rows=True), _layer(28, cout=16, k3c3=True, rows=True)
    assert merge_defines([packed_defines([rows8]), packed_defines([_layer(24)])])["MCU_PACKED_ROWS_COUT"] == 8
    assert merge_defines([packed_defines([rows8]), packed_defines([rows8])])["MCU_PACKED_ROWS_COUT"] == 8
    assert merge_defines([packed_defines([rows8]), packed_defines([rows16])])["MCU_PACKED_ROWS_COUT"] == 0


def test_s4_defines_merge_across_methods() -> None:
    """The 4-bit convolutions' definitions: the packed kernel's for the methods whose layers run it, and
    MCU_S4_STREAM 0 only when no method's layer does (a library of several methods serves them all)."""
    none, some = {S4_STREAM: 0}, {**packed_defines([_layer(24)]), S4_STREAM: 1}
    assert s4_merge_defines([none, none]) == {S4_STREAM: 0}
    assert s4_merge_defines([none, some, {}]) == some
    assert s4_merge_defines([some, {**packed_defines([_layer(300)]), S4_STREAM: 1}]) == {
        **_defines(PIXEL_WIDE_TAPS=256, PACKED_LOOP=1, PACKED_WINDOWS=1, **NARROW), S4_STREAM: 1}
    assert s4_merge_defines([{}, {}]) == {}
    # the Helium path's flag (a layer with scratch for its widened weights) merges the same way
    assert s4_merge_defines([{S4_STREAM: 0, S4_WIDE: 0}, {S4_STREAM: 0, S4_WIDE: 1}]) == {S4_STREAM: 0, S4_WIDE: 1}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_defines_for_reference_models(name: str) -> None:
    from compiled import compiled_model

    cm = compiled_model(name, "mps2-an505", "int8")
    assert cm.library.defines == EXPECTED[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_WAIT))
def test_defines_where_weights_wait(name: str) -> None:
    """The same models on mps2-an505-u575 (weights in flash with wait states); the partition report says so and
    what the packed streams chose."""
    from compiled import compiled_model

    cm = compiled_model(name, "mps2-an505-u575", "int8")
    assert cm.library.defines == EXPECTED_WAIT[name] and cm.partitions.weights_wait
    note = dict(cm.partitions.notes)["optimized"]
    assert "wait states a miss" in note and f"two channels a word ({8 if name == 'fc_autoencoder' else 0} of" in note


def _case(rng: np.random.Generator, cin: int, k: int = 1, cout: int = 12, act=(-128, 127), size: int = 0) -> dict:
    """A layer with right shifts (the assembly) on a size x size input (default k + 1); an activation floor
    above -128 puts the output offset at 0, so the floor is below it and the narrow path does not take the
    layer."""
    out_zp = -128 if act[0] == -128 else 0
    h = w = size or k + 1
    x = rng.integers(-128, 128, (1, h, w, cin)).astype(np.int8)
    x.flat[0] = -128
    wt = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
    b = rng.integers(-(2**20), 2**20, cout).astype(np.int32)
    m = rng.integers(2**29, 2**31 - 1, cout).astype(np.int64)
    sh = rng.integers(-12, 0, cout).astype(np.int64)  # right shifts: the assembly paths
    params = packed_params(x.shape, (1, h - k + 1, w - k + 1, cout), k, k, in_zp=int(rng.integers(-128, 128)),
                     out_zp=out_zp, act=act)
    expected = conv2d_s8(x, wt, b, m, sh, **params)
    return dict(x=x, w=tuned.pack_layer(wt.reshape(cout, -1), b, m, sh, out_zp), params=params, expected=expected)


def _run_on_m33(tmp: Path, cases: list[tuple[dict, bool]], defines: dict[str, int]) -> None:
    from mcu.device.sim.qemu import run_qemu
    from mcu.device.toolchain import build_firmware

    tmp.mkdir(parents=True, exist_ok=True)
    main = tmp / "main.c"
    # each case with whether it must run (bit-exact) or return MCU_ERR_UNSUPPORTED
    main.write_text(packed_firmware_source([dict(c, refused=not ok) for c, ok in cases], "specialised"))
    board = load_board("mps2-an505")
    fw = build_firmware(board, [main, kernel_source(tuned.SOURCE)], [runtime_dir() / "include"],
                        tmp / "out", defines=defines)
    result = run_qemu(board, fw.elf, timeout_s=300)
    assert result.exit_code == 0 and "specialised cases failed: 0" in result.console, result.console


@requires_qemu
@pytest.mark.qemu
@pytest.mark.parametrize("wide", [24, 152])
@pytest.mark.parametrize("loop", [1, 0])
def test_narrow_wide_taps_on_core(tmp_path: Path, wide: int, loop: int) -> None:
    """Pointwise windows (wide path: above the narrow path's 48 taps, or with an activation it does
    not take) below, at and above MCU_PIXEL_WIDE_TAPS, the odd group (kp = 4 mod 8) included, and a
    3x3 window across the limit; above the limit without the loop: MCU_ERR_UNSUPPORTED."""
    rng = np.random.default_rng(wide + loop)
    narrow_off = (-100, 127)  # act_min above the output offset -128: never the narrow path
    cases = []
    for kp in sorted({8, 12, wide - 8, wide - 4, wide, wide + 4, wide + 8, wide + 64, 300}):
        if kp <= 0:
            continue
        cases.append((_case(rng, kp, act=narrow_off), loop == 1 or kp <= wide))
        cases.append((_case(rng, kp, cout=7, act=narrow_off), loop == 1 or kp <= wide))  # a partial block too
    cases.append((_case(rng, 3, k=3, act=narrow_off), loop == 1 or 28 <= wide))  # 27 -> 28 taps
    cin = (wide + 16) // 9 + 1  # a 3x3 window just above the limit
    cases.append((_case(rng, cin, k=3, act=narrow_off), loop == 1 or (9 * cin + 3) // 4 * 4 <= wide))
    _run_on_m33(tmp_path, cases, {"MCU_PIXEL_WIDE_TAPS": wide, "MCU_PACKED_LOOP": loop})


@requires_qemu
@pytest.mark.qemu
def test_narrow_path_left_out_on_core(tmp_path: Path) -> None:
    """MCU_PACKED_NARROW 0: a layer the narrow path takes is refused, the others still exact; with
    MCU_PACKED_NARROW_K3C3 0 a 3x3 window of 3 channels is still exact (one pixel at a time), and with
    MCU_PACKED_WINDOWS 0 a 3x3 window of 16 channels; so are layers the pairs and four-pixel loops would take
    without them, while MCU_PACKED_NARROW_FULL 0 refuses a narrow layer of the full int8 range."""
    rng = np.random.default_rng(3)
    narrow = _case(rng, 12)  # 12 taps (pointwise: fewer than 16), 12 channels, full activation range: the narrow path
    wide = _case(rng, 64, act=(-100, 127))
    _run_on_m33(tmp_path / "a", [(narrow, False), (wide, True)],
                {"MCU_PIXEL_WIDE_TAPS": 64, "MCU_PACKED_LOOP": 0, "MCU_PACKED_NARROW": 0})
    rgb = _case(rng, 3, k=3)  # the narrow path's k3c3 layer
    _run_on_m33(tmp_path / "b", [(rgb, True), (narrow, True), (wide, True)],
                {"MCU_PIXEL_WIDE_TAPS": 64, "MCU_PACKED_LOOP": 0, "MCU_PACKED_NARROW_K3C3": 0})
    # MCU_PACKED_WINDOWS 0: a windowed layer (3x3, 144 taps, 2 x 2 pixels) still exact, one pixel at a time
    window = _case(rng, 16, k=3, cout=16, act=(-100, 127))
    _run_on_m33(tmp_path / "c", [(window, True), (wide, True)],
                {"MCU_PIXEL_WIDE_TAPS": 152, "MCU_PACKED_LOOP": 0, "MCU_PACKED_WINDOWS": 0})
    # without the flat pointwise pairs and the four-pixel loop a layer that would take them is still exact
    # (one pixel, or two, at a time); without the narrow engine of whole-byte stores a narrow layer with the
    # full range is refused, a clamped one (the other engine) exact
    pairs = _case(rng, 32, cout=16, act=(-100, 127), size=3)  # 9 pixels of 32 channels
    quads = _case(rng, 16, k=3, cout=32, act=(-100, 127), size=6)  # 4 x 4 pixels, a 9,856 B stream
    clamped = _case(rng, 12, act=(-128, 100))
    _run_on_m33(tmp_path / "d", [(pairs, True), (quads, True), (narrow, False), (clamped, True)],
                {"MCU_PIXEL_WIDE_TAPS": 152, "MCU_PACKED_LOOP": 0, "MCU_PACKED_PW_PAIRS": 0, "MCU_PACKED_QUADS": 0,
                 "MCU_PACKED_NARROW_FULL": 0})


def test_exported_library_builds_with_its_definitions(tmp_path: Path) -> None:
    """small_cnn's export carries its definitions in both fragments; the Makefile fragment builds the
    library on the host (the app's outputs: tests/emit/test_export.py) and, for the Cortex-M33, the exported
    kernel with the fragment's flags is the smaller specialised one."""
    from compiled import compiled_model
    from mcu.device.toolchain import compile_flags, find_cross_compiler

    cm = compiled_model("small_cnn", "mps2-an505", "int8")
    p = cm.library.prefix
    export_library(cm.library, tmp_path / "lib")
    flags = " ".join(f"-D{k}={v}" for k, v in sorted(cm.library.defines.items()))
    assert flags in (tmp_path / "lib" / f"{p}.mk").read_text()
    cmake = " ".join(f"{k}={v}" for k, v in sorted(cm.library.defines.items()))
    assert f"target_compile_definitions({p} PRIVATE {cmake})" in (tmp_path / "lib" / "CMakeLists.txt").read_text()
    (tmp_path / "Makefile").write_text(
        f"include lib/{p}.mk\nprint:\n\t@echo $({p.upper()}_CFLAGS)\n"
        f"lib.a: $({p.upper()}_SRCS)\n\t$(CC) -O2 -Wall -Wextra -Werror $({p.upper()}_CFLAGS) -c $^\n\tar rcs $@ *.o\n")
    done = subprocess.run(["make", "-s", "lib.a"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cflags = subprocess.run(["make", "-s", "print"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60).stdout.split()
    board_flags = compile_flags(load_board("mps2-an505"))
    kernel = tmp_path / "lib" / "kernels" / kernel_source(tuned.SOURCE).relative_to(kernels_dir())
    sizes, symbols = [], []
    for extra in ([], [f for f in cflags if f.startswith("-D")]):
        obj = tmp_path / f"k{len(extra)}.o"
        done = subprocess.run([str(find_cross_compiler()), *board_flags, *extra, "-I", str(tmp_path / "lib" / "include"),
                               "-c", "-o", str(obj), str(kernel)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        size = subprocess.run([str(find_cross_compiler()).replace("gcc", "size"), str(obj)], capture_output=True,
                              text=True, check=True).stdout.splitlines()[1].split()[0]
        sizes.append(int(size))
        nm = subprocess.run([str(find_cross_compiler()).replace("gcc", "nm"), str(obj)], capture_output=True,
                            text=True, check=True).stdout
        symbols.append({line.split()[-1].split(".")[0] for line in nm.splitlines()})
    assert sizes[1] < sizes[0] - 1000, sizes
    # small_cnn's layers take neither the flat pointwise pairs nor the narrow engine's clamped stores (its ranges
    # are all of int8): its kernel has neither; the unspecialised one (program files) has both
    paths = {"mcu_pixel2_packed", "mcu_narrow_engine_clamp"}
    assert paths <= symbols[0] and not paths & symbols[1], symbols
    assert "mcu_narrow_engine_full" in symbols[1]


def test_s4_helium_scratch_widens_the_weights() -> None:
    """w4a8 ResNet-8 on the Cortex-M55: its 64-channel 3x3 convolutions, whose int16 stream would pass 36 KiB,
    get scratch for their weights widened to int8 (one byte each) and link mcu_conv2d_s8, which runs them
    (MCU_S4_WIDE); on the Cortex-M33 they keep no scratch and their own loops."""
    from compiled import compiled_model
    from mcu.plan.contracts import scratch_bytes, s4_stream_bytes

    def wide(cm):
        return [op for op in cm.graph.ops if op.kind == "conv2d" and op.attrs.get("weight_bits") == 4
                and op.inputs[1].shape[0] == 64 and op.inputs[1].shape[2] == 3 and op.inputs[1].shape[1] == 64]

    m55 = compiled_model("resnet8", "mps3-an547", "w4a8")
    assert wide(m55) and all(not s4_stream_bytes(op) and op.attrs.get("scratch_bytes") == op.inputs[1].numel
                             for op in wide(m55))
    assert m55.library.defines[S4_WIDE] == 1
    assert "mcu_conv2d_s8" in {Path(k).stem for k in m55.library.kernel_sources}
    m33 = compiled_model("resnet8", "mps2-an505", "w4a8")
    assert all(scratch_bytes(op) == 0 and not op.attrs.get("scratch_bytes") for op in wide(m33))


def test_pointwise_groups_only_behind_a_flash_cache() -> None:
    """The flat pointwise pairs share reads of a large stream (FLAG_GROUP) only where the placement says the
    weights wait behind a cache of 8 kB or more (the U575's ICACHE); not without wait states (the zero-wait
    boards, --weights-in fast), nor behind the L4R5's 256 B data cache, where the groups' extra calls would save
    no miss: one decision, the placement's, and no board define beside it."""
    from mcu.device.placement import weights_cache_bytes, weights_wait
    from mcu.device.toolchain import board_defines

    def groups(board: str, placement: str = "flash") -> bool:
        b = load_board(board)
        return tuned.groups_pay(weights_wait(b, placement), weights_cache_bytes(b, placement))

    assert weights_cache_bytes(load_board("mps2-an505-u575"), "flash") == 8192 and groups("mps2-an505-u575")
    assert weights_cache_bytes(load_board("mps2-an386-l4r5"), "flash") == 256 and not groups("mps2-an386-l4r5")
    assert weights_cache_bytes(load_board("mps2-an505-u575"), "fast") == 0 and not groups("mps2-an505-u575", "fast")
    for name in ("mps2-an505", "mps2-an386"):
        assert weights_cache_bytes(load_board(name), "flash") == 0 and not groups(name)
    assert weights_cache_bytes(load_board("mps3-an547"), "flash") == 32768  # the M55's L1 data cache
    assert not any("PW_GROUP" in k for name in ("mps2-an505-u575", "mps2-an386-l4r5", "mps2-an505")
                   for k in board_defines(load_board(name)))


@pytest.mark.slow
def test_pointwise_groups_follow_the_placement() -> None:
    """ds_cnn's 64->64 streams (9.5 kB) wait on the L4R5 too, but its 256 B data cache holds no part of them:
    no stream there has FLAG_GROUP, so its build has no group code nor the groups' buffer (on the U575 it has,
    test_defines_where_weights_wait), nor the narrow first layer's parts."""
    from compiled import compiled_model

    cm = compiled_model("ds_cnn", "mps2-an386-l4r5", "int8")
    assert cm.partitions.weights_wait
    assert cm.library.defines == {**EXPECTED_WAIT["ds_cnn"], "MCU_PACKED_PW_GROUP_TAPS": 0, "MCU_PACKED_NARROW_PARTS": 0}
    assert "pointwise pixel pairs one by one (a cache of 256 B" in dict(cm.partitions.notes)["optimized"]


def test_narrow_parts_rule() -> None:
    """A narrow layer's pixels run by parts of the stream where it outgrows a way of the cache its waiting weights
    share with the code (ds_cnn's 10x4 first layer, 64 channels: 6,400 B over 4,096), not otherwise."""
    ds = dict(kp=40, cout=64, pixels=125, output_offset=-128)
    assert packed_defines([_layer(**ds, group=True)])["MCU_PACKED_NARROW_PARTS"] == 1
    assert packed_defines([_layer(**ds)])["MCU_PACKED_NARROW_PARTS"] == 0  # weights without a shared cache
    assert packed_defines([_layer(**{**ds, "cout": 32}, group=True)])["MCU_PACKED_NARROW_PARTS"] == 0  # 3,200 B
    assert packed_defines([_layer(kp=28, cout=64, k3c3=True, pixels=100, group=True)])["MCU_PACKED_NARROW_PARTS"] == 0
