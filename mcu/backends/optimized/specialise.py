"""Per-model specialisation of the packed convolution kernel (mcu_conv2d_packed_s8) at compile time.

The generated C is the same for every core and every model; what changes is the compile definitions
of runtime_c/kernels/convolution/mcu_conv2d_packed_s8.c, computed here from the model's packed layers and passed to
every build of the model (firmware, host, the exported library's CMake and Makefile fragments):

* ``MCU_PIXEL_WIDE_TAPS``: how many taps the straight-line dot product of convolution/gemm_s8_dsp.h
  (``mcu_pixel_packed_wide``, 84 B of code per 8 taps) covers: the widest window, rounded up to 8.
* ``MCU_PACKED_LOOP``: 0 leaves out ``mcu_pixel_packed_loop`` when every window fits the above.
* ``MCU_PACKED_WINDOWS``: 0 leaves out the two- and four-pixel loops of windowed layers and the stack of
  their columns when every layer is flat pointwise (1x1, stride 1, unpadded: the flat loop) or narrow.
* ``MCU_PACKED_NARROW``: 0 leaves out the narrow-layer path (convolution/conv_narrow_s8_dsp.h) when no
  layer takes it; ``MCU_PACKED_NARROW_K3C3`` 0 its runs of 3x3 windows of 3 channels (first layers of
  RGB images) when no narrow layer has such windows (without them such a layer would still be exact,
  one pixel at a time, only slower); ``MCU_PACKED_NARROW_ROWS`` 0 the widened rows of such windows at stride 2
  across (convolution/conv_k3c3_rows_s8_dsp.h, mobilenet_v1's first layer) when no narrow layer has them (they
  would run by threes, exact): their call adds its frame to the kernel's stack, and their slots to its column
  buffer. Only a stream with its rows section (tuned.rows_section, FLAG_ROWS) counts: a stream widened at run time
  (mcu_conv2d_s4's) would repack it on every call, in a larger buffer than the w4a8 builds of mobilenet_v1 have (they
  run it by threes).
* ``MCU_PACKED_ROWS_COUT``: the output channels of every layer that takes those widened rows when they all have the
  same (mobilenet_v1's 8), 0 otherwise: the passes then store a four's outputs at fixed offsets from one pointer (one
  step of it a four where four); a layer of another depth goes by threes (exact, slower).
* ``MCU_PIXEL4_GROUP``: ``PIXEL4_GROUP`` (4) when the build has the loop (``MCU_PACKED_LOOP``) and some
  windowed layer's stream outgrows a flash cache of ``PIXEL4_STREAM_MIN`` bytes with eight pixels or more
  to share it and its weights wait (FLAG_GROUP): its four-pixel units then run in groups (across rows) over parts of the stream, and the
  column buffer holds that many units (16 kB more stack); 1 otherwise (no grouping, the buffer unchanged).
* ``MCU_PACKED_PW_GROUP_TAPS``: the int16 the kernel's column buffer holds at least when some flat pointwise
  layer's stream outgrows a flash cache of ``PIXEL4_STREAM_MIN`` bytes and its weights wait (the stream's
  FLAG_GROUP: its pairs then share each read of the stream): room for up to eight of such a layer's pairs,
  the widest layer's, at least eight pairs of 64 taps (``PW_GROUP_TAPS``) and at most eight of 128
  (``PW_GROUP_TAPS_MAX``); 0 otherwise.
* ``MCU_PACKED_PW3_TAPS``: the int16 the column buffer holds at least for the widest layer the three-pixel blocks
  take (``takes_pw3``: every pixel's column, pixels x taps); 0 leaves their code out.
* ``MCU_PACKED_BYTES``: 0 leaves out the byte streams' path (fully connected layers whose weights wait,
  convolution/pair_bytes_s8_dsp.h) when no layer has one: its code would only crowd a flash cache.
* ``MCU_PACKED_SCALED``: 0 leaves out the pair loops' tails of scaled streams (FLAG_SCALED, tuned.pack_layer_scaled)
  when no layer has one: their code would only crowd a flash cache and move the others' placement in it.
* ``MCU_PACKED_PW_PAIRS``: 0 leaves out the flat pointwise layers' pixel pairs (``mcu_pixel2_packed``, its
  groups and ``mcu_pw8_pairs``, 3.3 kB on the M33) when no layer has two pixels of whole input words to pair.
* ``MCU_PACKED_QUADS``: 0 leaves out the windowed layers' four-pixel loop (``mcu_pixel4_packed_split``) when no
  windowed layer's stream outgrows a flash cache of ``PIXEL4_STREAM_MIN`` bytes.
* ``MCU_PACKED_NARROW_PARTS``: 0 leaves out the narrow layers' pixels by parts of the stream (a stream over a way
  of the cache the weights wait behind) when no layer takes them.
* ``MCU_PACKED_NARROW_CLAMP``, ``MCU_PACKED_NARROW_FULL``: 0 leaves out the narrow engine whose stores clamp
  to an activation range narrower than int8, or the one storing whole bytes, when no narrow layer needs it.

A path left out for speed only (the windows, pairs, four pixels, the narrow runs of 3x3x3 windows) leaves its
layers exact on a slower path; one a layer cannot do without (the loop, the narrow path and its engines, the
byte streams) makes the kernel refuse the layer (MCU_ERR_UNSUPPORTED).

Without definitions (the program-file interpreter, which must run any program) the kernel is the
full one, less the four-pixel units' grouping (``MCU_PIXEL4_GROUP`` 1: only slower, and the default
frame stays within a board's fixed stack). The conditions below mirror the C dispatch (mcu_conv2d_packed_s8, ``pixel`` and
``mcu_narrow_applies``); where the C decides at run time (the pixel direction depends on where the
memory plan put the tensors) the condition here is the wider one, so a path a layer may take is
never left out. If a definition is wrong anyway, the kernel returns MCU_ERR_UNSUPPORTED rather than
a wrong result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

WIDE_TAPS_MAX = 256  # the default MCU_PIXEL_WIDE_TAPS (convolution/gemm_s8_dsp.h)
NARROW_TAPS_MAX = 48  # MCU_NARROW_TAPS_MAX (convolution/conv_narrow_s8_dsp.h)
NARROW_PW_MIN = 16  # MCU_NARROW_PW_MIN: pointwise layers of this many taps or more take the two-pixel loops
PIXEL4_STREAM_MIN = 8192  # MCU_PIXEL4_STREAM_MIN (convolution/gemm_s8_dsp.h): stream bytes of a flash cache
PIXEL4_GROUP = 4  # four-pixel units sharing a read of the stream (MCU_PIXEL4_GROUP)
PW_GROUP_SPARE = 24  # MCU_PIXEL2_SPARE: the int16 of a pair's state after its column
PW_GROUP_PAIRS = 18  # the pairs of a group the buffer is sized for (the kernel groups what it holds, MCU_PW_GROUP_MAX)
PW_GROUP_TAPS = PW_GROUP_PAIRS * (2 * 64 + PW_GROUP_SPARE)  # 18 pairs of 64 taps and their state: 5,472 B
# 18 pairs of 128 taps, 10,080 B: mobilenet_v1's 128-channel layers (6 x 6 pixels) read their 35 kB streams
# once instead of three times (-0.8 % of the model on mps2-an505-u575, its RAM +5 kB; ds_cnn's 64->64
# layers four times instead of eight, +1.4 kB)
PW_GROUP_TAPS_MAX = PW_GROUP_PAIRS * (2 * 128 + PW_GROUP_SPARE)
PW3_PIXELS_MAX = 9  # MCU_PW3_PIXELS_MAX (convolution/pw3_s8_dsp.h): the images three-pixel blocks take
PW3_KP_STEP = 32  # MCU_PW3_KP_STEP: the taps whose multiples that loop's half passes take whole
PW4_PIXELS = (12, 36)  # MCU_PW4_PIXELS_MIN, _MAX (convolution/pw4_s8_dsp.h): the images four-pixel blocks take


@dataclass(frozen=True)
class PackedLayer:
    """What the kernel's dispatch reads of one layer: its mcu_conv2d_s8_params and the stream's flag."""

    kp: int  # mcu_conv_column_taps: kernel_h * kernel_w * input channels, rounded up to 4
    cout: int
    act_min: int
    output_offset: int
    right: bool  # FLAG_RIGHT of the packed stream (mcu/backends/optimized/tuned.py)
    k3c3: bool = False  # dilation_w 1, kernel_h 3, kernel_w * input channels 9 (mcu_conv_narrow_s8's k3c3)
    rows: bool = False  # 3x3 of 3 channels at stride 2 across, the range all of int8, a rows section (FLAG_ROWS)
    pointwise: bool = False  # kernel_h and kernel_w 1
    flat: bool = False  # pointwise, stride 1, unpadded, output h and w the input's: the flat pointwise loop
    pixels: int = 1  # output pixels (n * h * w)
    group: bool = False  # FLAG_GROUP: the weights wait behind a cache that holds a part (tuned.groups_pay)
    bytes: bool = False  # FLAG_BYTES: the byte stream's own loop, none of the paths below
    scaled: bool = False  # FLAG_SCALED: the flat pairs' scaled tails
    act_max: int = 127
    cin4: bool = True  # input channels a multiple of 4 (a flat layer's pixels are then whole words)

    @staticmethod
    def from_params(params: Mapping[str, Any], right: bool, group: bool = False, bytes: bool = False,
                    scaled: bool = False, rows_section: bool = False) -> "PackedLayer":
        k = int(params["kernel_h"]) * int(params["kernel_w"]) * int(params["input"]["c"])
        k3c3 = (int(params["dilation_w"]) == 1 and int(params["kernel_h"]) == 3
                and int(params["kernel_w"]) * int(params["input"]["c"]) == 9)
        rows = (rows_section and k3c3 and int(params["kernel_w"]) == 3 and int(params["stride_w"]) == 2
                and int(params["act_min"]) == -128 and int(params["act_max"]) == 127)
        pointwise = int(params["kernel_h"]) == 1 and int(params["kernel_w"]) == 1
        flat = (pointwise and int(params["stride_h"]) == 1 and int(params["stride_w"]) == 1
                and int(params["pad_top"]) == 0 and int(params["pad_left"]) == 0
                and int(params["output"]["h"]) == int(params["input"]["h"])
                and int(params["output"]["w"]) == int(params["input"]["w"]))
        return PackedLayer(kp=(k + 3) // 4 * 4, cout=int(params["output"]["c"]), act_min=int(params["act_min"]),
                           output_offset=int(params["output_offset"]), right=bool(right), k3c3=k3c3, rows=rows,
                           pointwise=pointwise, flat=flat,
                           pixels=int(params["output"]["n"]) * int(params["output"]["h"]) * int(params["output"]["w"]),
                           group=bool(group), bytes=bool(bytes), scaled=bool(scaled), act_max=int(params["act_max"]),
                           cin4=int(params["input"]["c"]) % 4 == 0)

    def takes_narrow(self) -> bool:
        """mcu_narrow_applies without its direction condition (run time; leaving it out only widens)."""
        return (not self.bytes and self.right and self.kp <= NARROW_TAPS_MAX
                and not (self.pointwise and (self.kp >= NARROW_PW_MIN or self.takes_pw8()))
                and self.cout % 4 == 0 and self.act_min >= self.output_offset)

    def clamps(self) -> bool:
        """The activation range is narrower than int8 (the C's ``clamp``: the stores clamp)."""
        return self.act_min > -128 or self.act_max < 127

    def takes_windows(self) -> bool:
        """The windowed layers' pixel loops (pairs, four pixels) may run it: a layer neither flat of whole
        input words (the C's flat loop) nor narrow whose stream the assembly requantizes in whole blocks (the
        C's ``pairs``, wider: the row length is not known here)."""
        return (not self.bytes and self.right and self.cout % 4 == 0 and not (self.flat and self.cin4)
                and not self.takes_narrow())

    def takes_quads(self) -> bool:
        """The windowed layers' four-pixel loop may run it: a stream of cout * (2 kp + 20) bytes over a flash
        cache's (the C's ``quads``, wider: four pixels in all, not in a row)."""
        return self.takes_windows() and self.pixels >= 4 and self.cout * (2 * self.kp + 20) > PIXEL4_STREAM_MIN

    def takes_pw_pairs(self) -> bool:
        """The flat pointwise pair loops may run it (the C's ``pw_pairs``, either direction; mcu_pw8_pairs too,
        which falls back on them for an input off a word): two pixels or more of whole input words, whole
        blocks, not narrow."""
        return (not self.bytes and self.right and self.flat and self.cin4 and self.cout % 4 == 0
                and self.pixels >= 2 and not self.takes_narrow())

    def groups_pairs(self) -> bool:
        """The flat pointwise pairs of mcu_conv2d_packed_s8 share each read of the stream (``pw_group``):
        a stream of cout * (2 kp + 20) bytes over a flash cache's, two pairs or more to share it, and the
        weights in memory with wait states (FLAG_GROUP: without them the groups' calls cost more than they save)."""
        return (self.group and self.takes_pw_pairs() and self.kp >= NARROW_PW_MIN and self.pixels >= 4
                and self.cout * (2 * self.kp + 20) > PIXEL4_STREAM_MIN)

    def narrow_parts(self) -> bool:
        """A narrow layer's pixels share each read of a part of its stream (the C's ``parts``, wider: the pixel
        loop's direction is known at run time): a stream over a way of a two-way cache of PIXEL4_STREAM_MIN bytes
        that the weights wait behind (FLAG_GROUP), outside the 3x3 windows of 3 channels' runs."""
        return (self.group and self.takes_narrow() and not self.k3c3 and self.pixels >= 2
                and self.cout * (2 * self.kp + 20) > PIXEL4_STREAM_MIN // 2)

    def groups_quads(self) -> bool:
        """The four-pixel units of a windowed layer share each read of the stream in groups (the C's
        ``quads`` and two units or more, wider: the row length is not known here, eight pixels in all), where
        the weights wait (FLAG_GROUP: without wait states the groups' calls cost more than they save)."""
        return self.group and self.takes_quads() and self.pixels >= 8

    def takes_pw8(self) -> bool:
        """The flat pointwise loop of 8 taps (mcu_pw8_pairs) may run it: two pixels or more, whole blocks
        (the C's ``pw8``, wider: 5 to 8 input channels pad to 8 taps, the loop takes exactly 8; all of them
        leave the narrow path, mcu_narrow_applies)."""
        return not self.bytes and self.right and self.flat and self.kp == 8 and self.cout % 4 == 0 and self.pixels >= 2

    def takes_pw8_regs(self) -> bool:
        """The register loop of 8 taps (mcu_pw8_regs) may run it: a pw8 layer of a scaled stream whose range is all of
        int8 (its bytes stored whole, the blocks forward), two blocks a pass (output channels a multiple of 8)."""
        return self.takes_pw8() and self.scaled and not self.clamps() and self.cout % 8 == 0 and self.cout != 16

    def takes_pw8_16(self) -> bool:
        """The register loop of 8 taps and 16 channels out (mcu_pw8_16_regs in pw_small_s8_dsp.h), which takes the
        layers of 16 channels mcu_pw8_regs would run (the C's ``mcu_pw8_16_takes``)."""
        return self.takes_pw8() and self.scaled and not self.clamps() and self.cout == 16

    def takes_pw_small(self) -> bool:
        """The register loops of 16 or 32 taps (mcu_pw16_regs, mcu_pw32_regs in pw_small_s8_dsp.h) may run it: flat
        pairs of a scaled stream whose range is all of int8 (its bytes stored whole), unless the stream outgrows a
        flash cache of PIXEL4_STREAM_MIN bytes that its waiting weights are read through (FLAG_GROUP: the groups' path)
        (the C's ``pws``, wider: its input may sit off a word)."""
        return (self.takes_pw_pairs() and self.kp in (16, 32) and self.scaled and not self.clamps()
                and (not self.group or self.cout * (2 * self.kp + 20) <= PIXEL4_STREAM_MIN))

    def takes_pw3(self) -> bool:
        """The three-pixel blocks (mcu_pw3_layer in pw3_s8_dsp.h) may run it: flat pairs of a scaled stream whose range
        is all of int8, a multiple of 3 pixels up to PW3_PIXELS_MAX, a multiple of PW3_KP_STEP taps."""
        return (self.takes_pw_pairs() and self.scaled and not self.clamps() and self.pixels % 3 == 0
                and self.pixels <= PW3_PIXELS_MAX and self.kp % PW3_KP_STEP == 0)

    def takes_pw4(self) -> bool:
        """The four-pixel blocks (mcu_pw4_layer in pw4_s8_dsp.h, Armv8-M Mainline) may run it: as takes_pw3, a
        multiple of 4 pixels within PW4_PIXELS (it comes before the three-pixel blocks), and only where its pairs
        would group, so that every column fits the buffer the groups size (without wait states the quads' columns
        would add up to 9 kB of stack, and mobilenet_v1's streamed rows then run in smaller bands)."""
        return (self.takes_pw_pairs() and self.scaled and not self.clamps() and self.pixels % 4 == 0
                and PW4_PIXELS[0] <= self.pixels <= PW4_PIXELS[1] and self.kp % PW3_KP_STEP == 0
                and self.groups_pairs() and self.pixels * self.kp <= PW_GROUP_TAPS_MAX)

    def group_taps(self) -> int:
        """The int16 of the column buffer that all of a grouping layer's pairs (up to eight) would fill."""
        return min(PW_GROUP_PAIRS, self.pixels // 2) * (2 * self.kp + PW_GROUP_SPARE)

    def dot_taps(self) -> int:
        """The taps mcu_pixel_packed runs for this layer on a DSP core (0: it never runs): layers with a
        right-shift stream and at least one whole block of 4 channels (``pixel``)."""
        return self.kp if self.right and self.cout >= 4 and not self.bytes else 0


# The definitions that say whether a path is built (1) or left out (0): a library of several methods builds a path
# any of them needs
PATHS = ("MCU_PACKED_LOOP", "MCU_PACKED_WINDOWS", "MCU_PACKED_NARROW", "MCU_PACKED_NARROW_K3C3", "MCU_PACKED_BYTES",
         "MCU_PACKED_PW8", "MCU_PACKED_PW_PAIRS", "MCU_PACKED_QUADS", "MCU_PACKED_NARROW_CLAMP",
         "MCU_PACKED_NARROW_FULL", "MCU_PACKED_SCALED", "MCU_PACKED_NARROW_ROWS", "MCU_PACKED_PW8_REGS",
         "MCU_PACKED_PW_SMALL", "MCU_PACKED_PW8_16", "MCU_PACKED_NARROW_PARTS")


# The definitions naming the output channels the small-K quads store at immediate offsets (0: any, by a register)
QUADS_COUT = {16: "MCU_PWS_Q16_COUT", 32: "MCU_PWS_Q32_COUT"}
STRB_OFFSET_MAX = 4095  # a Thumb-2 STRB's immediate offset: pixel D's last byte of a quad, 3 cout + 3 on


def quads_cout(layers: Iterable[PackedLayer], kp: int) -> int:
    """The output channels the small-K quads of `kp` taps (mcu_pw16_quads / mcu_pw32_quads in pw_small_s8_dsp.h)
    store at immediate offsets: those of the layer of the most outputs among the ones taking them (two pairs or more);
    the model's other layers of `kp` taps take the pairs. 0: none (the quads then take any count, by a register)."""
    small = [layer for layer in layers if layer.takes_pw_small() and layer.kp == kp and layer.pixels >= 4
             and 3 * layer.cout + 3 <= STRB_OFFSET_MAX]
    return max(small, key=lambda layer: (layer.pixels * layer.cout, layer.cout)).cout if small else 0


def packed_defines(layers: Iterable[PackedLayer]) -> dict[str, int]:
    """The compile definitions of mcu_conv2d_packed_s8.c for a model with these packed layers
    (empty: no packed layer, the kernel is not built)."""
    layers = list(layers)
    if not layers:
        return {}
    widest = max(layer.dot_taps() for layer in layers)
    groups = [layer.group_taps() for layer in layers if layer.groups_pairs()]
    loop = widest > WIDE_TAPS_MAX
    narrow = [layer for layer in layers if layer.takes_narrow()]
    return {"MCU_PIXEL_WIDE_TAPS": WIDE_TAPS_MAX if loop else max(8, (widest + 7) // 8 * 8),
            "MCU_PACKED_LOOP": int(loop),
            "MCU_PACKED_WINDOWS": int(any(layer.takes_windows() for layer in layers)),
            "MCU_PACKED_NARROW": int(bool(narrow)),
            "MCU_PACKED_NARROW_K3C3": int(any(layer.k3c3 for layer in narrow)),
            "MCU_PACKED_NARROW_ROWS": int(any(layer.rows for layer in narrow)),
            "MCU_PACKED_ROWS_COUT": _one_count(layer.cout for layer in narrow if layer.rows),
            "MCU_PACKED_NARROW_CLAMP": int(any(layer.clamps() for layer in narrow)),
            "MCU_PACKED_NARROW_FULL": int(any(not layer.clamps() for layer in narrow)),
            "MCU_PACKED_NARROW_PARTS": int(any(layer.narrow_parts() for layer in narrow)),
            "MCU_PACKED_PW_GROUP_TAPS": min(PW_GROUP_TAPS_MAX, max(PW_GROUP_TAPS, *groups)) if groups else 0,
            "MCU_PACKED_PW3_TAPS": max((layer.pixels * layer.kp for layer in layers if layer.takes_pw3()), default=0),
            "MCU_PACKED_PW4_TAPS": max((layer.pixels * layer.kp for layer in layers if layer.takes_pw4()), default=0),
            "MCU_PW4_COUT": _one_count(layer.cout for layer in layers if layer.takes_pw4()),
            "MCU_PW4_KP_MAX": max((layer.kp for layer in layers if layer.takes_pw4()), default=0),
            "MCU_PACKED_BYTES": int(any(layer.bytes for layer in layers)),
            "MCU_PACKED_SCALED": int(any(layer.scaled for layer in layers)),
            "MCU_PIXEL4_GROUP": PIXEL4_GROUP if loop and any(layer.groups_quads() for layer in layers) else 1,
            "MCU_PACKED_PW8": int(any(layer.takes_pw8() for layer in layers)),
            "MCU_PACKED_PW8_REGS": int(any(layer.takes_pw8_regs() for layer in layers)),
            "MCU_PACKED_PW8_16": int(any(layer.takes_pw8_16() for layer in layers)),
            "MCU_PACKED_PW_SMALL": int(any(layer.takes_pw_small() for layer in layers)),
            "MCU_PACKED_PW_PAIRS": int(any(layer.takes_pw_pairs() for layer in layers)),
            "MCU_PACKED_QUADS": int(any(layer.takes_quads() for layer in layers)),
            **{name: quads_cout(layers, kp) for kp, name in QUADS_COUT.items()}}


def merge_defines(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The definitions of one library of several methods (mcu/emit/c_methods.py): every path any needs."""
    parts = [p for p in parts if p]
    if not parts:
        return {}
    loop = any(p["MCU_PACKED_LOOP"] for p in parts)
    return {"MCU_PIXEL_WIDE_TAPS": WIDE_TAPS_MAX if loop else max(p["MCU_PIXEL_WIDE_TAPS"] for p in parts),
            **{name: int(any(p[name] for p in parts)) for name in PATHS},
            "MCU_PACKED_PW_GROUP_TAPS": max(p["MCU_PACKED_PW_GROUP_TAPS"] for p in parts),
            "MCU_PACKED_PW3_TAPS": max(p["MCU_PACKED_PW3_TAPS"] for p in parts),
            "MCU_PACKED_PW4_TAPS": max(p["MCU_PACKED_PW4_TAPS"] for p in parts),
            "MCU_PW4_COUT": _one_count(p["MCU_PW4_COUT"] for p in parts),
            "MCU_PW4_KP_MAX": max(p["MCU_PW4_KP_MAX"] for p in parts),
            "MCU_PIXEL4_GROUP": max(p["MCU_PIXEL4_GROUP"] for p in parts),
            "MCU_PACKED_ROWS_COUT": _one_count(p["MCU_PACKED_ROWS_COUT"] for p in parts if p["MCU_PACKED_NARROW_ROWS"]),
            **{name: _one_count(p.get(name, 0) for p in parts) for name in QUADS_COUT.values()}}


def _one_count(counts: Iterable[int]) -> int:
    """The one output count the layers or methods name, 0 where none does or they differ. A count only picks the
    stores at immediate offsets: a layer of another count takes the general stores, so any answer stays exact."""
    named = {c for c in counts if c}
    return named.pop() if len(named) == 1 else 0
