"""The CMSIS-NN backend: route supported int8 layers to CMSIS-NN's ``arm_*_s8`` functions.

When the user supplies CMSIS-NN (``--cmsis-nn PATH``, ``CMSIS_NN_PATH``, or an ARM CMSIS-NN pack in
cmsis-pack-manager's pack cache with ``--cmsis-nn auto``), :class:`CmsisNNBackend` comes first in the
build's preference order (mcu/backends/registry.py). The partitioner gives it every int8 op its
support table and :func:`plan_op` accept, before the memory plan, with the scratch its
``_get_buffer_size`` function asks for on the board's architecture (the functions below follow
CMSIS-NN's own, path by path, for plain C, DSP and MVE; planned in the arena like our own kernels'
scratch), and :func:`emit` writes the call: CMSIS-NN's parameter structs from the op's attributes,
a run-time check that the planned scratch is at least what CMSIS-NN's own ``_get_buffer_size``
returns, and the call, whose status maps to ``mcu_status``. Only the CMSIS-NN sources the model
calls are compiled: :class:`CmsisNN` indexes the tree's function definitions and takes the closure of
the calls from the entry points.

Conventions shared with our kernels (runtime_c/include/mcu/kernels_s8.h): ``input_offset`` is
``-input_zero_point``, ``output_offset`` is ``+output_zero_point``, per-channel multipliers are Q31 with
signed shifts (positive: left), weights OHWI / [kh][kw][out_c] (1HWO) / [out][in], activations NHWC.
The API is CMSIS-NN v7 (bench/speed.py's recorded figures are from commit 99f736a6).

CMSIS-NN kernels promise nothing about their output overlapping an input, so ops routed here get no
overlap contract (mcu/plan/contracts.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from mcu.backends.base import Backend, Constraint, Context, Rule
from mcu.backends.calls import KernelCall, Refs, split_at
from mcu.backends.cmsis_nn.options import CmsisNNOptions
from mcu.backends.weights import s4_weights
from mcu.errors import McuError
from mcu.ir import Op, Tensor
import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from mcu.device.boards import Board

BACKEND = "cmsis-nn"
ENV_VAR = "CMSIS_NN_PATH"
UNAVAILABLE = f"{ENV_VAR} is not set to a CMSIS-NN source tree"
HEADER = "arm_nnfunctions.h"
ARCHES = ("plain", "dsp", "mve")
VOID_FUNCTIONS = {"arm_softmax_s8"}  # returns nothing in CMSIS-NN


# --- finding the sources ------------------------------------------------------------------------------------


def cli_spec(flag: str | None, env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """What the command line asks for: ``--cmsis-nn`` if given, else ``CMSIS_NN_PATH`` (and which)."""
    env = dict(os.environ) if env is None else env
    if flag is not None:
        return flag, "--cmsis-nn"
    if env.get(ENV_VAR):
        return env[ENV_VAR], ENV_VAR
    return None, ""


def is_tree(root: Path) -> bool:
    return (root / "Include" / HEADER).is_file() and (root / "Source").is_dir()


def _version_key(p: Path) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.\-+]", p.name))


def pack_cache_dirs() -> list[Path]:
    """Where cmsis-pack-manager (and CMSIS-Toolbox) keep downloaded packs."""
    dirs: list[Path] = []
    try:  # the data directory of an installed cmsis-pack-manager
        # lazy: cmsis-pack-manager is optional
        import cmsis_pack_manager  # type: ignore[import-not-found]

        data = getattr(cmsis_pack_manager.Cache(True, True), "data_path", None)
        if data:
            dirs.append(Path(data))
    except Exception:  # noqa: BLE001 - not installed or not initialised: fall back to the usual places
        pass
    if os.environ.get("CMSIS_PACK_ROOT"):
        dirs.append(Path(os.environ["CMSIS_PACK_ROOT"]))
    home = Path.home()
    xdg = Path(os.environ.get("XDG_DATA_HOME", home / ".local" / "share"))
    dirs += [xdg / "cmsis-pack-manager", home / ".cache" / "arm" / "packs"]
    return dirs


def find_in_pack_cache(dirs: list[Path] | None = None) -> Path | None:
    """The newest ARM CMSIS-NN pack (``ARM/CMSIS-NN/<version>``) in the pack caches, if any."""
    for d in pack_cache_dirs() if dirs is None else dirs:
        versions = [p for p in (d / "ARM" / "CMSIS-NN").glob("*") if is_tree(p)]
        if versions:
            return max(versions, key=_version_key)
    return None


def resolve(spec: str | Path | None, env: dict[str, str] | None = None,
            cache_dirs: list[Path] | None = None, origin: str = "--cmsis-nn") -> Path | None:
    """Where CMSIS-NN is: ``spec`` is a path, or ``auto`` (``CMSIS_NN_PATH``, else the newest pack in
    the pack cache); None: not used. An error when asked for and absent. (The CLI passes
    ``CMSIS_NN_PATH`` as ``spec`` when ``--cmsis-nn`` is not given: :func:`cli_spec`.)"""
    env = dict(os.environ) if env is None else env
    if spec is None:
        return None
    if str(spec) == "auto":
        if env.get(ENV_VAR):
            return resolve(env[ENV_VAR], env, cache_dirs)
        found = find_in_pack_cache(cache_dirs)
        if found is None:
            raise McuError("--cmsis-nn auto: no CMSIS-NN pack in cmsis-pack-manager's pack cache and no "
                           f"{ENV_VAR}", hint="pass the CMSIS-NN source folder: --cmsis-nn PATH")
        return found
    root = Path(spec).expanduser().resolve()
    if not is_tree(root) and is_tree(root / "CMSIS-NN"):
        root = root / "CMSIS-NN"
    if not is_tree(root):
        raise McuError(f"{origin} {spec}: not a CMSIS-NN source tree (no Include/{HEADER} and Source/)",
                       hint="point it at a CMSIS-NN checkout or an unpacked ARM.CMSIS-NN pack")
    return root


_DEFINITION = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(arm_\w+)\s*\(([^;{}]*)\)\s*\{", re.M)
_CALL = re.compile(r"\b(arm_\w+)\s*\(")
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


@dataclass
class CmsisNN:
    """One CMSIS-NN source tree: which file defines which function, and the closure of calls."""

    root: Path

    @property
    def include_dir(self) -> Path:
        return self.root / "Include"

    @cached_property
    def _texts(self) -> dict[Path, str]:
        return {p: _COMMENT.sub(" ", p.read_text(errors="replace"))
                for p in sorted((self.root / "Source").rglob("*.c"))}

    @cached_property
    def definitions(self) -> dict[str, Path]:
        defs: dict[str, Path] = {}
        for path, text in self._texts.items():
            for m in _DEFINITION.finditer(text):
                defs.setdefault(m.group(1), path)
        return defs

    @cached_property
    def declared(self) -> set[str]:
        text = "".join(_COMMENT.sub(" ", p.read_text(errors="replace"))
                       for p in sorted(self.include_dir.rglob("*.h")))
        return set(_CALL.findall(text))

    def has(self, function: str) -> bool:
        return function in self.definitions and function in self.declared

    def sources(self, functions: list[str]) -> list[Path]:
        """The source files defining ``functions`` and everything they call, in a stable order."""
        todo = [f for f in functions if f in self.definitions]
        files: set[Path] = set()
        while todo:
            path = self.definitions[todo.pop()]
            if path in files:
                continue
            files.add(path)
            todo += [f for f in _CALL.findall(self._texts[path]) if f in self.definitions
                     and self.definitions[f] not in files]
        return sorted(files)


@lru_cache(maxsize=8)
def tree(root: str) -> CmsisNN:
    """The indexed tree at ``root`` (indexed once per process)."""
    return CmsisNN(Path(root))


# --- scratch sizing: CMSIS-NN v7's _get_buffer_size functions, per architecture -------------------------------


def arch_of(board: "Board") -> str:
    return "mve" if board.mve else "dsp" if board.dsp else "plain"


def _c_div(a: int, b: int) -> int:
    """C's truncating integer division."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - _c_div(a, b) * b


def convolve_s8_buffer_size(arch: str, in_c: int, kh: int, kw: int) -> int:
    """arm_convolve_s8_get_buffer_size: two int16 im2col columns of taps rounded up to 4 (plain, DSP);
    four int8 columns of whole 16-lane vectors (MVE, arm_convolve_s8_get_buffer_size_mve)."""
    cols = in_c * kh * kw
    if arch == "mve":
        return 4 * ((cols + 15) // 16) * 16
    return 2 * ((cols + 3) // 4 * 4) * 2


def _is_1x1(p: dict) -> bool:  # arm_nn_is_convolve_1x1
    f = p["filter"]
    return p["padding"] == (0, 0) and (f["w"], f["h"]) == (1, 1) and p["dilation"] == (1, 1) \
        and p["input"]["c"] == f["c"]


def _is_1_x_n(p: dict) -> bool:  # arm_nn_is_convolve_1_x_n
    i, f = p["input"], p["filter"]
    return i["h"] == 1 and p["dilation"][0] == 1 and f["h"] == 1 and (p["stride"][0] * i["c"]) % 4 == 0 \
        and i["c"] == f["c"]


def _1_x_n_padded_outputs(p: dict) -> tuple[int, int, bool]:
    """The MVE 1 x n convolutions' split of an output row: the outputs whose windows the right padding
    cuts, whether the row's odd total padding sits on the right, and whether the padded and unpadded
    outputs make the whole row (else the kernels take the general path)."""
    i, f, o = p["input"], p["filter"], p["output"]
    pad_x, stride_x = p["padding"][0], p["stride"][0]
    total_pad = (o["w"] - 1) * stride_x + f["w"] - i["w"]
    asym_pad = _c_mod(total_pad, 2)
    right = max(1, _c_div(pad_x + asym_pad + stride_x - 1, stride_x)) if pad_x + asym_pad != 0 else 0
    left = max(1, _c_div(pad_x + stride_x - 1, stride_x)) if pad_x != 0 else 0
    no_pad = max(o["w"] - (right + left), 0)
    return right, bool(asym_pad), right + no_pad + left == o["w"]


def _convolve_1_x_n_mve_buffer_size(p: dict) -> int:
    """arm_convolve_1_x_n_s8_get_buffer_size_mve: the padded left and right windows of the row."""
    i, f = p["input"], p["filter"]
    pad_x = p["padding"][0]
    right, asym_pad, whole = _1_x_n_padded_outputs(p)
    if not whole:
        return convolve_s8_buffer_size("mve", i["c"], f["h"], f["w"])
    pad_left = pad_x * i["c"]
    pad_right = right * i["c"] if asym_pad else pad_left
    elem_left = f["w"] * i["c"]
    return max(elem_left + pad_left, elem_left - i["c"] + pad_right)


def convolve_wrapper_s4_buffer_size(arch: str, p: dict) -> int:
    """arm_convolve_wrapper_s4_get_buffer_size: none for 1x1 windows; on MVE four int8 columns of whole
    16-lane vectors (none for a 1 x n row whose padded outputs split it, arm_convolve_1_x_n_s4); else
    two int16 columns of taps, not rounded (arm_convolve_s4_get_buffer_size)."""
    i, f = p["input"], p["filter"]
    if _is_1x1(p):
        return 0
    cols = i["c"] * f["h"] * f["w"]
    if arch == "mve":
        if _is_1_x_n(p) and _1_x_n_padded_outputs(p)[2]:
            return 0
        return 4 * ((cols + 15) // 16) * 16
    return 2 * cols * 2


def convolve_wrapper_s8_buffer_size(arch: str, p: dict) -> int:
    """arm_convolve_wrapper_s8_get_buffer_size for the path the wrapper takes (built with GCC, whose
    1x1 fast path needs no buffer on any architecture)."""
    i, f = p["input"], p["filter"]
    if _is_1x1(p):
        return 0
    if _is_1_x_n(p) and arch == "mve":
        return _convolve_1_x_n_mve_buffer_size(p)
    return convolve_s8_buffer_size(arch, i["c"], f["h"], f["w"])


# CONVERT_DW_CONV_WITH_ONE_INPUT_CH_AND_OUTPUT_CH_ABOVE_THRESHOLD when not built with Arm Compiler 6
DW_ONE_INPUT_CH_THRESHOLD = 1
CH_IN_BLOCK_MVE = 124


def depthwise_wrapper_s8_buffer_size(arch: str, p: dict) -> int:
    """arm_depthwise_conv_wrapper_s8_get_buffer_size: on MVE a one-input-channel depthwise layer runs
    as a convolution (its buffer plus the transposed filter); else the _opt kernel's im2col when it
    may run (not for 3x3 with padding <= 1 off MVE: arm_depthwise_conv_3x3_s8 needs none)."""
    i, f, o = p["input"], p["filter"], p["output"]
    if arch == "mve" and i["c"] == 1 and o["c"] > DW_ONE_INPUT_CH_THRESHOLD:
        conv = {**p, "filter": _dims(f["c"], f["h"], f["w"], f["n"])}
        return convolve_wrapper_s8_buffer_size(arch, conv) + f["c"] * f["h"] * f["w"] * f["n"]
    if not (i["c"] == o["c"] and i["n"] == 1 and p["dilation"] == (1, 1)):
        return 0
    if arch != "mve" and (f["w"], f["h"]) == (3, 3) and p["padding"][0] <= 1 and p["padding"][1] <= 1:
        return 0
    if arch == "mve":
        return 4 * CH_IN_BLOCK_MVE * f["w"] * f["h"]
    if arch == "dsp":
        return i["c"] * f["w"] * f["h"] * 2
    return 0


def depthwise_wrapper_s4_buffer_size(arch: str, p: dict) -> int:
    """arm_depthwise_conv_wrapper_s4_get_buffer_size: the _opt kernel's column buffer when the channel
    multiplier is 1 (batch 1, no dilation): on MVE CH_IN_BLOCK_MVE channels of four windows, else the
    channels of one window as int16, on every other architecture (the _opt kernel refuses a NULL buffer)."""
    i, f, o = p["input"], p["filter"], p["output"]
    if not (i["c"] == o["c"] and i["n"] == 1 and p["dilation"] == (1, 1)):
        return 0
    if arch == "mve":
        return 4 * CH_IN_BLOCK_MVE * f["w"] * f["h"]
    return i["c"] * f["w"] * f["h"] * 2


def fully_connected_s8_buffer_size(arch: str, out_features: int) -> int:
    """arm_fully_connected_s8_get_buffer_size: on MVE the kernel sums (one int32 per output), which
    this backend computes at compile time as a constant (:func:`kernel_sums`) instead of scratch."""
    return out_features * 4 if arch == "mve" else 0


def kernel_sums(op: Op) -> Tensor:
    """What arm_vector_sum_s8 computes before an MVE fully connected layer, once, here: per output
    ``bias + input_offset * sum(weights row)`` (filter offset 0), kept on the op so that every
    emission names one constant."""
    cached = op.attrs.get("cmsis_kernel_sums")
    if isinstance(cached, Tensor):
        return cached
    w, b = op.inputs[1], op.inputs[2]
    rows = np.asarray(w.data, dtype=np.int64).reshape(w.shape[0], -1)
    bias = np.zeros(w.shape[0], dtype=np.int64) if b is None or b.data is None else \
        np.asarray(b.data, dtype=np.int64).reshape(-1)
    sums = bias + int(op.attrs["input_offset"]) * rows.sum(axis=1)
    data = ((sums + 2**31) % 2**32 - 2**31).astype(np.int32)  # C's int32 wrap-around
    t = Tensor(name=f"{w.name}_kernel_sums", shape=(data.size,), dtype="int32", data=data)
    op.attrs["cmsis_kernel_sums"] = t
    return t


def avgpool_s8_buffer_size(arch: str, channels: int) -> int:
    return channels * 4 if arch == "dsp" else 0


# --- which ops CMSIS-NN serves, and their parameters --------------------------------------------------------


def _dims(n: int, h: int, w: int, c: int) -> dict:
    return {"n": n, "h": h, "w": w, "c": c}


def _nhwc(t: Any) -> dict:
    n, c, h, w = t.shape
    return _dims(n, h, w, c)


@dataclass
class Layer:
    """One op as CMSIS-NN calls it: the function, its parameter values and the planned scratch."""

    function: str
    values: dict
    scratch: int = 0
    buffer_size_call: str | None = None  # the _get_buffer_size function checked at run time
    needs: list[str] = field(default_factory=list)  # functions whose sources the call needs


def _window(op: Op) -> dict:
    a = op.attrs
    return {"stride": (a["stride"][1], a["stride"][0]), "padding": (a["padding"][1], a["padding"][0]),
            "dilation": (a["dilation"][1], a["dilation"][0])}


def _conv(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
    x, w = op.inputs[:2]
    if op.attrs["groups"] != 1:
        return "grouped convolution"
    c_out, c_in, kh, kw = w.shape
    v = {"input": _nhwc(x), "filter": _dims(c_out, kh, kw, c_in), "bias": _dims(1, 1, 1, c_out),
         "output": _nhwc(op.output), **_window(op),
         "input_offset": int(op.attrs["input_offset"]), "output_offset": int(op.attrs["output_offset"]),
         "act": (int(op.attrs["act_min"]), int(op.attrs["act_max"]))}
    if op.attrs.get("weight_bits") == 4:
        if arch == "mve" and (c_in * kh * kw) % 2 and c_out % 4:
            return MVE_S4_ODD
        return Layer("arm_convolve_wrapper_s4", v, convolve_wrapper_s4_buffer_size(arch, v),
                     "arm_convolve_wrapper_s4_get_buffer_size")
    return Layer("arm_convolve_wrapper_s8", v, convolve_wrapper_s8_buffer_size(arch, v),
                 "arm_convolve_wrapper_s8_get_buffer_size")


def _depthwise(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
    x, w = op.inputs[:2]
    c_out, _, kh, kw = w.shape
    v = {"input": _nhwc(x), "filter": _dims(1, kh, kw, c_out), "bias": _dims(1, 1, 1, c_out),
         "output": _nhwc(op.output), **_window(op), "ch_mult": int(op.attrs["ch_mult"]),
         "input_offset": int(op.attrs["input_offset"]), "output_offset": int(op.attrs["output_offset"]),
         "act": (int(op.attrs["act_min"]), int(op.attrs["act_max"]))}
    if op.attrs.get("weight_bits") == 4:
        if v["input"]["c"] % 2:
            # arm_depthwise_conv_s4 finds its weights by counting the taps it visits, so a window the padding
            # cuts short reads other weights, and with a channel multiplier its row stride is a byte short
            return "4-bit depthwise with an odd number of input channels (CMSIS-NN's s4 kernel misreads the weights)"
        if arch == "mve":
            # measured in QEMU's Cortex-M55 (ds_cnn's 64-channel and a 16-channel 3x3 layer): the Helium path of
            # arm_depthwise_conv_s4_opt gives other outputs on every odd channel, the ones its predicated nibble
            # shifts leave alone; its C path equals ours and the reference
            return "4-bit depthwise on Helium (CMSIS-NN's MVE s4 depthwise differs from the reference on odd channels)"
        return Layer("arm_depthwise_conv_wrapper_s4", v, depthwise_wrapper_s4_buffer_size(arch, v),
                     "arm_depthwise_conv_wrapper_s4_get_buffer_size")
    return Layer("arm_depthwise_conv_wrapper_s8", v, depthwise_wrapper_s8_buffer_size(arch, v),
                 "arm_depthwise_conv_wrapper_s8_get_buffer_size")


# Measured in QEMU's Cortex-M55 against the reference (tests/kernels/test_kernels_s4_mve.py lists the cases): the
# MVE build of CMSIS-NN's s4 matrix products wrote other outputs for fully connected layers of 2, 3, 5, 6, 7, 9,
# 10, 17 or 18 outputs (or 33 inputs) and for 3x3 windows over 7 channels into 5 or 6 outputs, where its C build
# and ours agree with the reference; every case with an even row into a multiple of 4 outputs, or an odd window
# into a multiple of 4 outputs, agreed. Those are the only shapes routed there.
MVE_S4_ODD = ("4-bit weights on Helium outside the shapes CMSIS-NN's MVE s4 kernels were found to compute right "
              "(even rows, or outputs a multiple of 4)")


def _uniform(t: Any) -> bool:
    data = np.asarray(t.data).reshape(-1)
    return data.size > 0 and bool(np.all(data == data[0]))


def _fully_connected(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
    x, w = op.inputs[:2]
    mult, shift = op.inputs[3], op.inputs[4]
    out_f, in_f = w.shape
    batch = x.numel // in_f
    v = {"arch": arch, "input": _dims(batch, 1, 1, in_f), "filter": _dims(in_f, 1, 1, out_f), "bias": _dims(1, 1, 1, out_f),
         "output": _dims(batch, 1, 1, out_f), "input_offset": int(op.attrs["input_offset"]),
         "filter_offset": 0, "output_offset": int(op.attrs["output_offset"]),
         "act": (int(op.attrs["act_min"]), int(op.attrs["act_max"]))}
    uniform = _uniform(mult) and _uniform(shift)
    if uniform:
        v["multiplier"] = int(np.asarray(mult.data).reshape(-1)[0])
        v["shift"] = int(np.asarray(shift.data).reshape(-1)[0])
    if op.attrs.get("weight_bits") == 4:
        if not uniform:
            return "per-channel 4-bit fully connected (arm_fully_connected_s4 takes one multiplier for the layer)"
        if arch == "mve" and (in_f % 2 or out_f % 4):
            return MVE_S4_ODD
        return Layer("arm_fully_connected_s4", v)
    if uniform:
        return Layer("arm_fully_connected_s8", v, 0, "arm_fully_connected_s8_get_buffer_size")
    if lib.has("arm_fully_connected_per_channel_s8"):
        return Layer("arm_fully_connected_per_channel_s8", v, 0, "arm_fully_connected_s8_get_buffer_size")
    return "per-channel fully connected needs arm_fully_connected_per_channel_s8 (CMSIS-NN >= 6)"


def _elementwise(function: str) -> Callable[[Op, str, CmsisNN], "Layer | str"]:
    def plan(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
        a, b = op.inputs
        out = op.output
        if not all(t.shape == out.shape and t.dim_order == out.dim_order for t in (a, b)):
            return "broadcasting"
        at = op.attrs
        v = {"size": out.numel, **{k: int(at.get(k, 0)) for k in (
            "a_offset", "a_multiplier", "a_shift", "b_offset", "b_multiplier", "b_shift", "left_shift",
            "output_offset", "out_multiplier", "out_shift", "act_min", "act_max")}}
        return Layer(function, v)
    return plan


def _pool(function: str) -> Callable[[Op, str, CmsisNN], "Layer | str"]:
    def plan(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
        a = op.attrs
        x = op.inputs[0]
        if x.shape[0] != 1:
            return "batched pooling"
        v = {"input": _nhwc(x), "filter": _dims(1, a["kernel"][0], a["kernel"][1], 1), "output": _nhwc(op.output),
             "stride": (a["stride"][1], a["stride"][0]), "padding": (a["padding"][1], a["padding"][0]),
             "act": (int(a["act_min"]), int(a["act_max"]))}
        if function == "arm_avgpool_s8":
            return Layer(function, v, avgpool_s8_buffer_size(arch, x.shape[1]), "arm_avgpool_s8_get_buffer_size")
        return Layer(function, v)
    return plan


def _softmax(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
    outer, axis, inner = split_at(op.inputs[0], op.attrs["axis"])
    if inner != 1:
        return "softmax over a non-innermost axis"
    v = {"rows": outer, "row_size": axis, **{k: int(op.attrs[k]) for k in
                                             ("input_multiplier", "input_left_shift", "diff_min")}}
    return Layer("arm_softmax_s8", v)


PLANNERS: dict[str, Callable[[Op, str, CmsisNN], "Layer | str"]] = {
    "conv2d": _conv,
    "depthwise_conv2d": _depthwise,
    "linear": _fully_connected,
    "add": _elementwise("arm_elementwise_add_s8"),
    "mul": _elementwise("arm_elementwise_mul_s8"),
    "max_pool2d": _pool("arm_max_pool_s8"),
    "avg_pool2d": _pool("arm_avgpool_s8"),
    "softmax": _softmax,
}


def plan_op(op: Op, arch: str, lib: CmsisNN) -> Layer | str:
    """The CMSIS-NN call for ``op``, or why CMSIS-NN does not serve it."""
    if op.output.dtype != "int8" or op.kind not in PLANNERS or op.attrs.get("alias"):
        return "not an int8 op CMSIS-NN serves"
    if op.inputs and op.inputs[0].dtype != "int8":
        return "input is not int8"
    layer = PLANNERS[op.kind](op, arch, lib)
    if isinstance(layer, Layer):
        needed = [layer.function] + ([layer.buffer_size_call] if layer.buffer_size_call else [])
        missing = [f for f in needed if not lib.has(f)]
        if missing:
            return f"this CMSIS-NN tree lacks {', '.join(missing)}"
        layer.needs = needed
    return layer


# --- the generated call -------------------------------------------------------------------------------------


def _tile(name: str, v: tuple[int, int]) -> str:
    return f".{name} = {{.w = {v[0]}, .h = {v[1]}}}"


def _dims_c(name: str, d: dict) -> str:
    return f"const cmsis_nn_dims {name} = {{.n = {d['n']}, .h = {d['h']}, .w = {d['w']}, .c = {d['c']}}};"


def _act_c(v: tuple[int, int]) -> str:
    return f".activation = {{.min = {v[0]}, .max = {v[1]}}}"


def _status(expr: str) -> str:
    return f"{expr} == ARM_CMSIS_NN_SUCCESS ? MCU_OK : MCU_ERR_UNSUPPORTED"


def _ctx_c(ref: Refs, scratch: int) -> list[str]:
    if scratch and ref.scratch is not None:
        return [f"const cmsis_nn_context cmsis_ctx = {{.buf = {ref.scratch[0]}, .size = {ref.scratch[1]}}};"]
    return ["const cmsis_nn_context cmsis_ctx = {.buf = NULL, .size = 0};"]


def _check_c(call: str) -> str:
    return f"if ({call} > cmsis_ctx.size) return MCU_ERR_BUFFER_TOO_SMALL;"


def call_text(op: Op, ref: Refs) -> tuple[str, list[str]]:
    """The CMSIS-NN call expression for a routed op and the declarations it needs."""
    layer = plan_op(op, op.attrs["cmsis_nn"]["arch"], tree(op.attrs["cmsis_nn"]["root"]))
    assert isinstance(layer, Layer), layer
    v, f = layer.values, layer.function
    if op.attrs.get("weight_bits") == 4:
        ref = _with_s4_weights(op, ref)
    if f in ("arm_convolve_wrapper_s8", "arm_depthwise_conv_wrapper_s8", "arm_convolve_wrapper_s4",
             "arm_depthwise_conv_wrapper_s4"):
        x, w, b, mult, shift = op.inputs[:5]
        ptype = "cmsis_nn_conv_params" if f.startswith("arm_convolve") else "cmsis_nn_dw_conv_params"
        extra = f".ch_mult = {v['ch_mult']}, " if "ch_mult" in v else ""
        decls = _ctx_c(ref, layer.scratch) + [
            f"const {ptype} conv_params = {{.input_offset = {v['input_offset']}, "
            f".output_offset = {v['output_offset']}, {extra}{_tile('stride', v['stride'])}, "
            f"{_tile('padding', v['padding'])}, {_tile('dilation', v['dilation'])}, {_act_c(v['act'])}}};",
            f"const cmsis_nn_per_channel_quant_params cmsis_quant = {{.multiplier = (int32_t *){ref(mult)}, "
            f".shift = (int32_t *){ref(shift)}}};",
            _dims_c("input_dims", v["input"]), _dims_c("filter_dims", v["filter"]),
            _dims_c("bias_dims", v["bias"]), _dims_c("output_dims", v["output"]),
            _check_c(f"{layer.buffer_size_call}(&conv_params, &input_dims, &filter_dims, &output_dims)"),
        ]
        call = (f"{f}(&cmsis_ctx, &conv_params, &cmsis_quant, &input_dims, {ref(x)}, &filter_dims, {ref(w)}, "
                f"&bias_dims, {ref(b)}, &output_dims, {ref(op.output)})")
        return call, decls
    if f in ("arm_fully_connected_s8", "arm_fully_connected_per_channel_s8", "arm_fully_connected_s4"):
        x, w, b, mult, shift = op.inputs[:5]
        if f != "arm_fully_connected_per_channel_s8":
            quant = (f"const cmsis_nn_per_tensor_quant_params cmsis_quant = {{.multiplier = {v['multiplier']}, "
                     f".shift = {v['shift']}}};")
        else:
            quant = (f"const cmsis_nn_per_channel_quant_params cmsis_quant = {{.multiplier = (int32_t *)"
                     f"{ref(mult)}, .shift = (int32_t *){ref(shift)}}};")
        ctx = _ctx_c(ref, layer.scratch)
        if v["arch"] == "mve":  # the kernel sums, a constant made at compile time (kernel_sums)
            ctx = [f"const cmsis_nn_context cmsis_ctx = {{.buf = (void *){ref(kernel_sums(op))}, "
                   f".size = {4 * v['output']['c']}}};"]
        decls = ctx + [
            f"const cmsis_nn_fc_params fc_params = {{.input_offset = {v['input_offset']}, "
            f".filter_offset = {v['filter_offset']}, .output_offset = {v['output_offset']}, {_act_c(v['act'])}}};",
            quant, _dims_c("input_dims", v["input"]), _dims_c("filter_dims", v["filter"]),
            _dims_c("bias_dims", v["bias"]), _dims_c("output_dims", v["output"]),
        ] + ([_check_c(f"{layer.buffer_size_call}(&filter_dims)")] if layer.buffer_size_call else [])
        call = (f"{f}(&cmsis_ctx, &fc_params, &cmsis_quant, &input_dims, {ref(x)}, &filter_dims, {ref(w)}, "
                f"&bias_dims, {ref(b)}, &output_dims, {ref(op.output)})")
        return call, decls
    if f == "arm_elementwise_add_s8":
        a, b = op.inputs
        call = (f"{f}({ref(a)}, {ref(b)}, {v['a_offset']}, {v['a_multiplier']}, {v['a_shift']}, {v['b_offset']}, "
                f"{v['b_multiplier']}, {v['b_shift']}, {v['left_shift']}, {ref(op.output)}, {v['output_offset']}, "
                f"{v['out_multiplier']}, {v['out_shift']}, {v['act_min']}, {v['act_max']}, {v['size']})")
        return call, []
    if f == "arm_elementwise_mul_s8":
        a, b = op.inputs
        call = (f"{f}({ref(a)}, {ref(b)}, {v['a_offset']}, {v['b_offset']}, {ref(op.output)}, {v['output_offset']}, "
                f"{v['out_multiplier']}, {v['out_shift']}, {v['act_min']}, {v['act_max']}, {v['size']})")
        return call, []
    if f in ("arm_max_pool_s8", "arm_avgpool_s8"):
        decls = _ctx_c(ref, layer.scratch) + [
            f"const cmsis_nn_pool_params pool_params = {{{_tile('stride', v['stride'])}, "
            f"{_tile('padding', v['padding'])}, {_act_c(v['act'])}}};",
            _dims_c("input_dims", v["input"]), _dims_c("filter_dims", v["filter"]),
            _dims_c("output_dims", v["output"]),
        ]
        if layer.buffer_size_call:
            decls.append(_check_c(f"{layer.buffer_size_call}({v['output']['w']}, {v['input']['c']})"))
        call = (f"{f}(&cmsis_ctx, &pool_params, &input_dims, {ref(op.inputs[0])}, &filter_dims, &output_dims, "
                f"{ref(op.output)})")
        return call, decls
    if f == "arm_softmax_s8":
        call = (f"{f}({ref(op.inputs[0])}, {v['rows']}, {v['row_size']}, {v['input_multiplier']}, "
                f"{v['input_left_shift']}, {v['diff_min']}, {ref(op.output)})")
        return call, []
    raise AssertionError(f)  # pragma: no cover


def _with_s4_weights(op: Op, ref: Refs) -> Refs:
    """``ref`` naming the packed 4-bit weights where it would name the op's int8 weights."""
    w, packed = op.inputs[1], s4_weights(op)
    return Refs(lambda t: ref(packed) if t is w else ref(t), ref.scratch, ref.program)


def emit(op: Op, ref: Refs) -> KernelCall:
    """The KernelCall of a routed op: the CMSIS-NN call as a status expression, its declarations, the
    CMSIS-NN sources it needs (absolute paths) and the include folder."""
    info = op.attrs["cmsis_nn"]
    lib = tree(info["root"])
    layer = plan_op(op, info["arch"], lib)
    assert isinstance(layer, Layer), layer
    call, decls = call_text(op, ref)
    status = f"({call}, MCU_OK)" if layer.function in VOID_FUNCTIONS else _status(call)
    operands: list[Any] = [*op.inputs, op.output]
    if op.attrs.get("weight_bits") == 4:
        operands = [s4_weights(op) if t is op.inputs[1] else t for t in operands]
    # function "" renders as MCU_CHECK((<status expression>)); program files cannot express it
    # (mcu/program/writer.py raises UnsupportedKernel), so host runs use the generated C.
    return KernelCall("", [status], [str(p) for p in lib.sources(layer.needs)], locals=decls,
                      operands=operands, headers=[HEADER], include_dirs=[str(lib.include_dir)],
                      backend_function=layer.function)


# --- the backend --------------------------------------------------------------------------------------------


_INT8_IN = Constraint("input is not int8", lambda op: bool(op.inputs) and op.inputs[0].dtype == "int8")
_ONE_GROUP = Constraint("grouped convolution", lambda op: op.attrs.get("groups", 1) == 1)
_SAME_SHAPES = Constraint("broadcasting (CMSIS-NN's elementwise functions take equal shapes)",
                          lambda op: all(t.shape == op.output.shape and t.dim_order == op.output.dim_order
                                         for t in op.inputs))
_BATCH_1 = Constraint("batched pooling", lambda op: op.inputs[0].shape[0] == 1)
_INNERMOST = Constraint("softmax over a non-innermost axis",
                        lambda op: split_at(op.inputs[0], op.attrs["axis"])[2] == 1)
_MATRIX = Constraint("weights are not a matrix", lambda op: len(op.inputs[1].shape) == 2)


class CmsisNNBackend(Backend):
    """CMSIS-NN's int8 functions, compiled from the user's CMSIS-NN tree (its options: :class:`CmsisNNOptions`)."""

    id: ClassVar[str] = BACKEND
    weights_s4: ClassVar[bool] = True  # arm_convolve_wrapper_s4, arm_depthwise_conv_wrapper_s4, arm_fully_connected_s4
    rules: ClassVar[tuple[Rule, ...]] = (
        Rule("conv2d", ("int8",), "per-channel", (_INT8_IN, _ONE_GROUP)),
        Rule("depthwise_conv2d", ("int8",), "per-channel", (_INT8_IN,)),
        Rule("linear", ("int8",), "any", (_INT8_IN, _MATRIX)),
        Rule("add", ("int8",), "any", (_INT8_IN, _SAME_SHAPES)),
        Rule("mul", ("int8",), "any", (_INT8_IN, _SAME_SHAPES)),
        Rule("max_pool2d", ("int8",), "any", (_INT8_IN, _BATCH_1)),
        Rule("avg_pool2d", ("int8",), "any", (_INT8_IN, _BATCH_1)),
        Rule("softmax", ("int8",), "any", (_INT8_IN, _INNERMOST)),
    )

    def options(self, ctx: Context) -> CmsisNNOptions | None:
        return ctx.options.get(self.id)

    def _root(self, ctx: Context) -> str:
        options = self.options(ctx)
        assert options is not None  # partition() asks unavailable() first
        return str(options.root)

    def unavailable(self, ctx: Context) -> str | None:
        options = self.options(ctx)
        if options is None:
            return f"no CMSIS-NN sources given (--cmsis-nn PATH or {ENV_VAR})"
        if not is_tree(Path(options.root)):
            return f"{options.root} is not a CMSIS-NN source tree"
        return None

    def refuse(self, op: Op, ctx: Context) -> str | None:
        if op.attrs.get("alias"):
            return "a view (no code)"
        why = super().refuse(op, ctx)
        if why is not None:
            return why
        layer = plan_op(op, arch_of(ctx.board), tree(self._root(ctx)))
        return layer if isinstance(layer, str) else None

    def take(self, op: Op, ctx: Context) -> None:
        root = self._root(ctx)
        arch = arch_of(ctx.board)
        layer = plan_op(op, arch, tree(root))
        assert isinstance(layer, Layer), layer
        op.attrs["cmsis_nn"] = {"root": root, "arch": arch, "function": layer.function, "scratch": layer.scratch}
        op.attrs["no_overlap"] = True  # CMSIS-NN promises nothing about its output overlapping an input
        if layer.scratch:
            op.attrs["scratch_bytes"] = max(int(op.attrs.get("scratch_bytes", 0)), layer.scratch)

    def emit(self, op: Op, refs: Any) -> KernelCall:
        return emit(op, refs)
