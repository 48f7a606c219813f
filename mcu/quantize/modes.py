"""The quantization modes a model compiles with (``quantize=``, ``--quantize``): their names, and what
each asks of the pipeline. Only names and predicates, so that every layer can ask."""

from __future__ import annotations

from dataclasses import dataclass

from mcu.errors import McuError

NONE = "none"  # fp32 throughout
INT8 = "int8"  # static int8: activations and weights, scales from calibration (pt2e)
W4A8 = "w4a8"  # static int8 activations, 4-bit per-channel weights of convolutions and linear layers
W8A16 = "w8a16"  # static int16 activations (symmetric, zero point 0), int8 per-channel weights (16x8)
MIXED = "mixed"  # static int8 activations; each layer's weights int8, 4-bit or a look-up table, under a budget
INT8_WEIGHT = "int8-weight"  # fp32 activations, int8 linear weights
INT8_DYNAMIC = "int8-dynamic"  # int8 linear weights, activations quantized per call
INT4_WEIGHT = "int4-weight"  # torchao's groupwise int4 linear weights
INT4_DYNAMIC = "int4-dynamic"  # int4 linear weights, activations quantized per call
AUTO = "auto"  # INT8 when the model file provides calibration data (or is quantized already), NONE otherwise

MODES = (NONE, INT8, W4A8, W8A16, MIXED, INT8_WEIGHT, INT8_DYNAMIC, INT4_WEIGHT, INT4_DYNAMIC)
CHOICES = (AUTO, *MODES)  # what the command line and the API accept


def check(mode: str) -> None:
    if mode not in MODES:
        raise McuError(f"unknown quantization mode '{mode}'", hint=f"use one of: {', '.join(MODES)}")


def is_float(mode: str) -> bool:
    """No quantization at all."""
    return mode == NONE


def is_static_int8(mode: str) -> bool:
    return mode == INT8


def is_static(mode: str) -> bool:
    """Activations int8 with scales from calibration (pt2e), whatever the weights' width."""
    return mode in (INT8, W4A8, W8A16, MIXED)


def weight_bits(mode: str) -> int:
    """The width of the convolution and linear weights of a static mode (mixed: int8, narrowed per layer after
    the lowering, mcu/passes/mixed_choice.py)."""
    return 4 if mode == W4A8 else 8


def activation_bits(mode: str) -> int:
    """The width of a static mode's activations."""
    return 16 if mode == W8A16 else 8


# Modes whose biases are corrected unless --bias-correction off: their error is mostly the rounded weights' (4-bit
# weights; int8 weights under 16-bit activations), and correcting it gains 17 to 39 dB of output SQNR on
# fc_autoencoder, ds_cnn and tcn (w4a8: 0.3 to 27 dB on the other examples). int8 gains 0 to 6 dB (its
# activations bound it) for two to three times the calibration's time, so it asks for it; mixed narrows layers
# after the correction (README, "16-bit activations").
CORRECTED_BY_DEFAULT = (W4A8, W8A16)


def corrects_biases(mode: str, requested: bool | None) -> bool:
    """Whether a static mode's convolution and linear biases are corrected for their rounded weights
    (``--bias-correction on|off``, mcu/quantize/bias_correction.py); ``requested`` None: the mode's default."""
    if requested is not None and not isinstance(requested, bool):
        # the string "off" is truthy: taken as it comes, it would turn the correction on
        raise McuError(f"bias_correction must be True, False or None, got {requested!r}",
                       hint="from the command line: --bias-correction on|off")
    if requested and not is_static(mode):
        raise McuError(f"--bias-correction corrects the biases of a static mode (int8, w4a8, w8a16, mixed); it does "
                       f"not apply to --quantize {mode}", hint="drop --bias-correction, or use a static mode")
    if requested is not None:
        return requested
    return mode in CORRECTED_BY_DEFAULT


NEAREST = "nearest"  # each weight to its nearest code
GPTQ = "gptq"  # each layer's rounding error spread over its later input columns (mcu/quantize/gptq.py)
# each channel's (gate row's) scale searched among clipping ratios (mcu/quantize/weight_scales.py); recurrent
# matrices then GPTQ-rounded on it, every other weight to its nearest code
SEARCHED = "searched"
WEIGHT_ROUNDINGS = (NEAREST, GPTQ, SEARCHED)
# Modes whose convolution and linear weights GPTQ rounds unless --weight-rounding nearest: none. After bias
# correction it moves the examples' output SQNR by -6.8 to +1.1 dB (w8a16 and w4a8 on fc_autoencoder, ds_cnn, tcn
# and kws_lstm; README, "16-bit activations") for up to three times the quantization's time: their inputs and
# random weights leave little correlation between a layer's inputs for it to use, and what it gains on the
# calibration data does not reach the test inputs' output.
GPTQ_BY_DEFAULT: tuple[str, ...] = ()
# Modes with searched scales unless --weight-rounding says otherwise: w8a16, whose error is its int8 weights'
# (README, "16-bit activations": kws_lstm and tcn gain, fc_autoencoder and ds_cnn keep theirs). int8's stays
# nearest: its activations bound it.
SEARCHED_BY_DEFAULT: tuple[str, ...] = (W8A16,)


def weight_rounding(mode: str, requested: str | None) -> str:
    """How a static mode rounds its convolution, linear and recurrent weights onto their grids
    (``--weight-rounding nearest|gptq|searched``); ``requested`` None: the mode's default."""
    if requested is not None and requested not in WEIGHT_ROUNDINGS:
        raise McuError(f"unknown weight rounding '{requested}'", hint=f"use one of: {', '.join(WEIGHT_ROUNDINGS)}")
    if requested in (GPTQ, SEARCHED) and not is_static(mode):
        raise McuError(f"--weight-rounding {requested} rounds the weights of a static mode (int8, w4a8, w8a16, mixed) "
                       f"with their calibration data; it does not apply to --quantize {mode}",
                       hint="drop --weight-rounding, or use a static mode")
    if requested is not None:
        return requested
    if mode in GPTQ_BY_DEFAULT:
        return GPTQ
    return SEARCHED if mode in SEARCHED_BY_DEFAULT else NEAREST


PALETTE_BITS = (2, 3, 4)
PALETTE_PER = ("channel", "tensor")


@dataclass(frozen=True)
class PaletteOptions:
    """Look-up-table weights: the index width, and whether each output channel has its own table of int8
    codes (``channel``) or every channel of a tensor shares one (``tensor``, ``--palette-per tensor``)."""
    bits: int
    per: str = "channel"


Palette = int | PaletteOptions  # an int: that many bits, a table per channel


def palette_options(palette: Palette | None) -> PaletteOptions | None:
    return PaletteOptions(palette) if isinstance(palette, int) else palette


def check_palette(mode: str, palette: Palette | None) -> None:
    """Look-up-table weights (``--weight-palette BITS``) are built on static int8 (``--quantize int8``) and
    16x8 (``w8a16``) only."""
    options = palette_options(palette)
    if options is None:
        return
    bits = options.bits
    if options.per not in PALETTE_PER:
        raise McuError(f"--palette-per {options.per}: tables are per channel or per tensor",
                       hint="use --palette-per channel or tensor")
    if bits not in PALETTE_BITS:
        raise McuError(f"--weight-palette {bits}: look-up-table weights take 2, 3 or 4 bits",
                       hint="use --weight-palette 2, 3 or 4")
    if mode not in (INT8, W8A16):
        raise McuError(f"--weight-palette needs --quantize int8 or w8a16; it is not built for --quantize {mode}",
                       hint="use --quantize int8 or w8a16 with --weight-palette, or drop --weight-palette")


def int8_weights(mode: str) -> bool:
    """fp32 activations with int8 linear weights."""
    return mode in (INT8_WEIGHT, INT8_DYNAMIC)


def int4_weights(mode: str) -> bool:
    return mode in (INT4_WEIGHT, INT4_DYNAMIC)


def is_dynamic(mode: str) -> bool:
    """Activations quantized per call."""
    return mode in (INT8_DYNAMIC, INT4_DYNAMIC)


OBJECTIVES = ("flash", "instructions")


@dataclass(frozen=True)
class MixedOptions:
    """``--quantize mixed``: ``budget`` the most the model may lose against the all-int8 build in its own
    metric (dB of output SQNR against fp32 on the calibration data; with ``eval_data``, points of its metric
    in percent); ``objective`` what the choice minimizes, the flash the layers' forms decide on the board
    (their constants and their kernels' code) or the estimated instructions."""

    budget: float
    objective: str = "flash"


def check_mixed(mode: str, mixed: MixedOptions | None) -> None:
    """``--accuracy-budget`` goes with ``--quantize mixed``, and mixed needs it."""
    if mode == MIXED and mixed is None:
        raise McuError("--quantize mixed needs --accuracy-budget",
                       hint="e.g. --accuracy-budget 3: at most 3 dB of output SQNR (or, with eval_data, 3 points of "
                            "its metric) below the all-int8 build")
    if mixed is None:
        return
    if mode != MIXED:
        raise McuError(f"--accuracy-budget chooses each layer's precision for --quantize mixed; it does not apply to "
                       f"--quantize {mode}", hint="use --quantize mixed with --accuracy-budget, or drop it")
    if not mixed.budget >= 0:
        raise McuError(f"--accuracy-budget {mixed.budget}: the budget is a loss, at least 0",
                       hint="0: nothing below the all-int8 build's score; larger lets more layers narrow")
    if mixed.objective not in OBJECTIVES:
        raise McuError(f"unknown mixed-precision objective '{mixed.objective}'", hint=f"one of {', '.join(OBJECTIVES)}")
