"""Program files on the host: the format against its C and schema sources, the program run by the host
extension against the generated C (bit for bit), multi-method files sharing weights, external weights,
and malformed files (truncated, bit-flipped, oversized) getting their own status codes."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from cli_runner import mcu_in_process
from host_builds import build_interpreter_app
from mcu.backends.portable.conv import S4_CALLS
from mcu.errors import McuError
from mcu.paths import kernel_source
from mcu.program import MethodSource, write_program
from mcu.program import format as fmt
from mcu.program.methods import load_methods
from mcu.program.writer import program_from
from mcu.program.host import Program, ProgramError
from programs import (PROGRAM_MODELS, TWO_METHOD_MODEL, assert_program_equals_generated_c, model_file, same_bits,
                      two_methods, zoo)
from repo import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
# --- the format against its sources ------------------------------------------------------------------------


def _c_enum(text: str, prefix: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(rf"\b{prefix}(\w+) = (\d+)", text)}


def test_kernel_ids_match_the_c_header() -> None:
    header = (ROOT / "runtime_c/include/mcu/program.h").read_text()
    ids = _c_enum(header, "MCU_K_")
    for function, kid in fmt.KERNEL_IDS.items():
        assert ids[fmt.kernel_macro(function)] == kid, function
    assert ids["COUNT"] == max(fmt.KERNEL_IDS.values()) + 1
    assert ids["DELEGATE"] == fmt.KERNEL_DELEGATE
    steps = {"LOOP": fmt.KERNEL_LOOP, "FILL": fmt.KERNEL_FILL, "MOVE": fmt.KERNEL_MOVE, "ROWS": fmt.KERNEL_ROWS}
    assert {k: ids[k] for k in steps} == steps and min(steps.values()) > fmt.KERNEL_DELEGATE
    # every kernel of the public enum has its row in the interpreter's table, and no row is left over
    assert set(ids) - {"COUNT", "DELEGATE", *steps} == {fmt.kernel_macro(f) for f in fmt.KERNEL_IDS}


def test_kernel_table_rows_are_whole() -> None:
    """Each row of runtime_c/interp/mcu_kernels.def names a kernel mcu has, its check functions exist, and the
    call runs that kernel: the table is the one place a program-file kernel is added."""
    table = (ROOT / "runtime_c/interp/mcu_kernels.def").read_text()
    rows = re.findall(r"^MCU_KERNEL\((\w+), (\d+), (\d+), \"([FBIUHLXfibhl*]*)\", (\d), (\w+), (\w+), (\w+),\n\s+(.*)\)$",
                      table, re.M)
    assert len(rows) == len(fmt.KERNEL_IDS) == len(set(r[1] for r in rows))
    kernels_c = (ROOT / "runtime_c/interp/mcu_program_kernels.c").read_text()
    params_c = (ROOT / "runtime_c/interp/mcu_program_params.c").read_text()
    for name, _kid, _n, operands, _weights, need, params, alias, call in rows:
        assert kernel_source(f"mcu_{name.lower()}.c").is_file(), name
        assert f"mcu_{name.lower()}(" in call, (name, call)
        assert 2 <= len(operands) <= fmt.MAX_OPERANDS or name == "CONCAT", name
        assert f"mcu_status mcu_program_need_{need}(" in kernels_c, need
        assert f"int mcu_program_params_{params}(" in params_c, params
        assert f"int mcu_program_alias_{alias}(" in params_c, alias


def test_every_emitted_kernel_has_a_program_id() -> None:
    """A kernel the C emitters can call but program files cannot would make the host run fall back."""
    emitters = "".join(p.read_text() for p in sorted((ROOT / "mcu/backends/portable").glob("*.py")))
    called = {name for name in re.findall(r'"(mcu_[a-z0-9_]+)"', emitters)
              if not name.endswith("_params") and name != "mcu_shape4"}
    called |= {f"mcu_{n}_f32" for n in re.findall(r'_(?:binary|unary)\("(\w+)"\)', emitters)}
    called |= {f"mcu_{n}_s8" for n in re.findall(r'_binary_s8\("(\w+)"\)', emitters)}
    variants = ROOT / "mcu/backends/portable/variants.py"  # the int8 matmul variant table
    if variants.exists():
        called |= set(re.findall(r'Variant\("\w+", "(mcu_\w+)"', variants.read_text()))
    assert {"mcu_conv2d_f32", "mcu_add_f32", "mcu_sigmoid_f32", "mcu_mul_s8", "mcu_conv2d_1x1_s8"} <= called
    called -= {src for sources in S4_CALLS.values() for src in sources[1:]}  # linked for the s4 kernels' own calls
    missing = sorted(called - set(fmt.KERNEL_IDS))
    assert not missing, f"kernels without a program kernel id: {missing}"


def test_field_ids_follow_the_schema() -> None:
    schema = (ROOT / "runtime_c/schema/program.fbs").read_text()
    schema = re.sub(r"//[^\n]*", "", schema)
    tables = {m.group(1): [f.split(":")[0].strip() for f in m.group(2).split(";") if ":" in f]
              for m in re.finditer(r"table (\w+) \{(.*?)\}", schema, re.S)}
    expected = {"Quant": fmt.Field.QUANT, "Tensor": fmt.Field.TENSOR, "Instruction": fmt.Field.INSTRUCTION,
                "BundledVector": fmt.Field.BUNDLED, "Method": fmt.Field.METHOD, "Segment": fmt.Field.SEGMENT,
                "Delegate": fmt.Field.DELEGATE, "ExternalWeights": fmt.Field.EXTERNAL,
                "Program": fmt.Field.PROGRAM}
    for table, ids in expected.items():
        assert tables[table] == sorted(ids, key=ids.__getitem__), table
    internal = (ROOT / "runtime_c/interp/mcu_program_internal.h").read_text()
    assert "MCU_TENSOR_NAME, MCU_TENSOR_DTYPE, MCU_TENSOR_SHAPE, MCU_TENSOR_DIM_ORDER, MCU_TENSOR_QUANT" in internal


def _struct_fields(headers: str) -> dict[str, list[str]]:
    text = re.sub(r"/\*.*?\*/", "", headers, flags=re.S)
    structs: dict[str, list[tuple[str, str]]] = {}
    for m in re.finditer(r"typedef struct \{(.*?)\}\s*(\w+);", text, re.S):
        fields = []
        for decl in m.group(1).split(";"):
            if decl.strip():
                typ, names = decl.strip().split(None, 1)
                fields += [(typ, re.sub(r"\[.*\]", "", n).strip()) for n in names.split(",")]
        structs[m.group(2)] = fields

    def flat(name: str) -> list[str]:
        return [f"{n}.{x}" if typ in structs else n for typ, n in structs[name] for x in (flat(typ) if typ in structs
                                                                                          else [None])]
    return {name: flat(name) for name in structs}


@pytest.mark.xdist_group("program_zoo")  # the zoo models are compiled once per worker (tests/support/programs.py)
def test_params_dicts_list_struct_fields_in_declaration_order(tmp_path_factory) -> None:
    """Program params are the struct's words in declaration order: the emitters' dicts must be in that order."""
    from mcu.emit.kernels import emit_call

    headers = "".join((ROOT / "runtime_c/include/mcu" / h).read_text()
                      for h in ("tensor.h", "kernels_f32.h", "kernels_s8.h", "kernels_generic.h"))
    structs = _struct_fields(headers)

    def keys(d: dict, pre: str = "") -> list[str]:
        return [k2 for k, v in d.items() for k2 in (keys(v, f"{pre}{k}.") if isinstance(v, dict) else [pre + k])]

    seen = set()
    # the zoo has every op kind in both modes (the examples' compiles added no struct it lacks)
    models = [zoo(tmp_path_factory, q) for q in ("none", "int8")]
    for cm in models:
        for op in cm.graph.ops:
            call = emit_call(op, lambda t: "x")
            if call is not None and call.params_type is not None:
                assert keys(call.params) == structs[call.params_type], call.params_type
                seen.add(call.params_type)
    assert len(seen) >= 12


# --- parity with the generated C --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("quantize", ["none", "int8"])
@pytest.mark.parametrize("name", PROGRAM_MODELS)
def test_program_equals_generated_c_on_host(compiled, name: str, quantize: str) -> None:
    cm = compiled(name, quantize=quantize)
    assert_program_equals_generated_c(cm)
    if quantize == "int8":
        x = cm.spec.test_inputs[0]
        for got, want in zip(cm.run_raw(*x), cm.reference_raw(*x)):
            assert same_bits(got, want)  # and the Python integer reference


@pytest.mark.parametrize("quantize", ["int8-weight", "int8-dynamic"])
def test_mixed_precision_linear_layers_through_the_program(compiled, quantize: str) -> None:
    assert_program_equals_generated_c(compiled("fc_autoencoder", quantize=quantize))


@pytest.mark.xdist_group("program_zoo")
@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_every_op_kind_through_the_program(tmp_path_factory, quantize: str) -> None:
    cm = zoo(tmp_path_factory, quantize)
    used = {op.kind for op in cm.graph.ops}
    # (at int8, `/ 2.0` is a table lookup)
    assert {"avg_pool2d", "softmax", "concat", "pad", "permute", "mul", "slice",
            "div" if quantize == "none" else "lut"} <= used
    assert_program_equals_generated_c(cm)


def test_compiled_model_runs_through_the_program(compiled) -> None:
    cm = compiled("small_cnn")
    x = cm.spec.test_inputs[0]
    assert cm.runtime_program().method_names == ["forward"]
    got = cm.run(*x)[0].numpy()
    want = cm.eager(*x)[0].numpy()
    assert float(np.max(np.abs(got - want))) <= 1e-4 * float(np.max(np.abs(want)))
    assert same_bits(cm.run_raw(*x)[0], cm.run_raw_c(*x)[0])


def test_runtime_program_api(compiled) -> None:
    cm = compiled("ds_cnn", quantize="int8")
    prog = Program.load(cm.program_image().program)
    assert prog.method_names == ["forward"]
    assert prog.arena_sizes == {"forward": [cm.memory.arena_size]}
    forward = prog.method("forward")
    spec = forward.inputs[0]
    assert spec.dtype == "int8" and spec.shape == tuple(cm.graph.inputs[0].shape)
    assert spec.dim_order == tuple(cm.graph.inputs[0].dim_order)
    assert spec.scale == pytest.approx(cm.graph.inputs[0].quant.scale[0])
    x = cm.spec.test_inputs[0][0]
    # Logical-shape call (float input quantized with the input's parameters) == the raw path.
    (codes,) = forward(x, raw=True)
    assert same_bits(codes, cm.raw_outputs(cm.run_raw(x))[0])
    assert same_bits(codes, cm.run(x, raw=True)[0].numpy())
    # By default both host paths return the model's real values, as float32, identically.
    (values,) = forward(x)
    assert values.dtype == np.float32 and same_bits(values, cm.run(x)[0].numpy())
    assert same_bits(values, cm.decode_outputs(cm.run_raw(x))[0])
    with pytest.raises(McuError, match="no method 'decode'"):
        prog.method("decode")
    with pytest.raises(McuError, match="takes 1 inputs"):
        forward.run_raw()
    with pytest.raises(ProgramError) as err:
        forward.run_raw(*cm.encode_inputs((x,)), arena_sizes=[cm.memory.arena_size - 4])
    assert err.value.status_name == "buffer too small"


# --- malformed files ----------------------------------------------------------------------------------------


def _status(blob: bytes, **kw) -> int:
    try:
        Program.load(blob, **kw)
    except ProgramError as exc:
        return exc.status
    return 0


STATUS = {"truncated program": 8, "oversized program": 9, "program checksum mismatch": 10,
          "unsupported program version": 11, "weights mismatch": 12, "invalid program": 7,
          "weights corrupt": 18}


def test_status_codes_have_names() -> None:
    from mcu._native import status_str

    for name, code in STATUS.items():
        assert status_str(code) == name


def test_truncated_bit_flipped_and_oversized_files(compiled) -> None:
    blob = compiled("small_cnn", quantize="int8").program_image().program
    assert _status(blob) == 0
    for cut in (0, 10, 63, 64, len(blob) // 2, len(blob) - 1):
        assert _status(blob[:cut]) == STATUS["truncated program"], cut
    assert _status(blob + b"\0") == STATUS["oversized program"]
    assert _status(blob + bytes(4096)) == STATUS["oversized program"]
    for pos in range(64, len(blob), max(1, len(blob) // 64)):  # flips in the flatbuffer and in the weights
        flipped = bytearray(blob)
        flipped[pos] ^= 1 << (pos % 8)
        assert _status(bytes(flipped)) == STATUS["program checksum mismatch"], pos
    version = bytearray(blob)
    struct.pack_into("<I", version, 4, fmt.FORMAT_VERSION + 1)
    assert _status(bytes(version)) == STATUS["unsupported program version"]
    wrong_magic = bytearray(blob)
    wrong_magic[0:4] = b"XXXX"
    assert _status(bytes(wrong_magic)) == STATUS["invalid program"]


def test_bit_flips_past_the_checksum_never_crash(compiled) -> None:
    """With the CRC skipped, every flip reaches the verifier: it loads (and runs) or names the fault."""
    cm = compiled("small_cnn", quantize="int8")
    blob = cm.program_image().program
    header = fmt.read_header(blob)
    outcomes: dict[int, int] = {}
    for pos in range(0, header.data_offset, 3):
        for bit in (0, 5):
            flipped = bytearray(blob)
            flipped[pos] ^= 1 << bit
            status = _status(bytes(flipped), verify_checksum=False)
            outcomes[status] = outcomes.get(status, 0) + 1
            if status == 0:
                prog = Program.load(bytes(flipped), verify_checksum=False)
                for m in prog.methods:
                    try:
                        m.run_raw(*(np.zeros(s.numel, s.dtype) for s in m.inputs))
                    except (ProgramError, McuError):
                        pass
    assert set(outcomes) <= {0, *STATUS.values(), 2, 3, 4, 13}, outcomes
    assert outcomes.get(STATUS["invalid program"], 0) > 0


def test_delegate_payload_for_an_unregistered_backend_is_refused() -> None:
    assert _status(delegate_program(backend_id="vendor.npu")) == 4  # MCU_ERR_UNSUPPORTED: not registered


DELEGATE_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mcu/program.h"

/* A backend through the delegate registry (mcu/delegate.h): payload "SCAL", version 1, one float. */
typedef struct { int inits, runs, destroys; float scale; } backend_state;
static backend_state state;

static mcu_status init(const uint8_t *payload, uint32_t size, void *arena, uint32_t arena_size, void **handle)
{
    (void)arena; (void)arena_size;
    if (size != 8 + sizeof(float)) return MCU_ERR_DELEGATE_PAYLOAD;
    memcpy(&state.scale, payload + 8, sizeof(float)); /* the "compiled partition": one scale factor */
    state.inits++;
    *handle = &state;
    return MCU_OK;
}

static mcu_status execute(void *handle, void *const *ops, const uint32_t *bytes, uint32_t n_inputs,
                          uint32_t n_outputs)
{
    backend_state *s = handle;
    if (n_inputs != 1 || n_outputs != 1 || bytes[0] != bytes[1]) return MCU_ERR_INVALID_ARG;
    const float *x = ops[0];
    float *y = ops[1];
    for (uint32_t i = 0; i < bytes[0] / 4; ++i) y[i] = x[i] * s->scale;
    s->runs++;
    return MCU_OK;
}

static void destroy(void *handle) { ((backend_state *)handle)->destroys++; }

static const mcu_delegate_backend scale_backend = {"test.scale", {'S', 'C', 'A', 'L'}, 1u, init, execute, destroy};

int main(int argc, char **argv)
{
    static uint8_t file[1 << 16] __attribute__((aligned(16)));
    static uint8_t arena[1024] __attribute__((aligned(16)));
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    if (f == NULL) return 2;
    size_t n = fread(file, 1, sizeof(file), f);
    fclose(f);
    const mcu_delegate_backend *const registry[1] = {&scale_backend};
    void *handles[1];
    const mcu_program_options options = {NULL, 0, registry, 1, 0, handles, 1, 0};
    mcu_program p;
    mcu_status st = mcu_program_load(&p, file, (uint32_t)n, &options);
    if (st != MCU_OK) { printf("load %s\n", mcu_status_str(st)); return 1; }
    float x[8], y[8];
    for (int i = 0; i < 8; ++i) x[i] = (float)i;
    const void *ins[1] = {x};
    void *outs[1] = {y};
    uint8_t *const arenas[1] = {arena};
    const uint32_t sizes[1] = {sizeof(arena)};
    st = mcu_program_run(&p, 0, arenas, sizes, 1, ins, outs);
    mcu_program_unload(&p);
    printf("%s %d %d %d", mcu_status_str(st), state.inits, state.runs, state.destroys);
    for (int i = 0; i < 8; ++i) printf(" %g", y[i]);
    printf("\n");
    return 0;
}
"""


def delegate_program(backend_id: str = "test.scale", magic: bytes = b"SCAL", version: int = 1) -> bytes:
    """A method whose one op is a delegated partition, as mcu.backends.base.partition makes it."""
    from mcu.ir import Graph, Op, Tensor
    from mcu.plan.memory import plan_memory

    x = Tensor("x", (1, 8), "float32", is_input=True)
    y = Tensor("y", (1, 8), "float32", is_output=True)
    payload = magic + struct.pack("<If", version, 2.5)
    op = Op("delegate", [x], [y], {"backend": backend_id, "version": version, "payload": payload, "ops": ["mul"]},
            "npu_partition")
    graph = Graph([x], [y], [op], name="delegated")
    return write_program([MethodSource("forward", graph, plan_memory(graph))]).program


def _delegate_app(tmp_path: Path) -> Path:
    return build_interpreter_app(DELEGATE_MAIN, tmp_path / "app")


def test_registered_delegate_runs_its_partition(tmp_path) -> None:
    import subprocess

    exe = _delegate_app(tmp_path)
    runs = {}
    for name, image in [("ok", delegate_program()), ("version", delegate_program(version=2)),
                        ("magic", delegate_program(magic=b"XNNP"))]:
        (tmp_path / f"{name}.mpk").write_bytes(image)
        runs[name] = subprocess.run([str(exe), str(tmp_path / f"{name}.mpk")], capture_output=True, text=True,
                                    timeout=60).stdout
    assert runs["ok"].split() == ["ok", "1", "1", "1", *[f"{2.5 * i:g}" for i in range(8)]], runs["ok"]
    # The registry refuses a payload of another version or another backend at load, with a status code.
    assert runs["version"].strip() == "load unsupported delegate payload version"
    assert runs["magic"].strip() == "load delegate payload for another backend"


# --- several methods, shared weights ------------------------------------------------------------------------


def test_methods_dict_names_the_entry_points(tmp_path_factory) -> None:
    path = model_file(tmp_path_factory.getbasetemp(), "autoencoder", TWO_METHOD_MODEL)
    names = [name for name, _ in load_methods(path)]
    assert names == ["forward", "encode", "decode"]
    assert [name for name, _ in load_methods(EXAMPLES / "small_cnn.py")] == ["forward"]


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_shared_weights_are_stored_once(tmp_path_factory, quantize: str) -> None:
    methods = two_methods(tmp_path_factory, quantize)
    image = program_from(methods)
    blob = image.program
    header = fmt.read_header(blob)
    uniques: dict[bytes, str] = {}
    per_method_total = 0
    for m in methods:
        for t in m.model.graph.constants():
            data = np.ascontiguousarray(np.asarray(t.data).astype(np.dtype(t.dtype))).tobytes()
            uniques.setdefault(data, t.name)
            per_method_total += len(data)
    unique_total = sum(len(d) for d in uniques)
    # The data region holds each unique constant once, 16-byte aligned: only padding on top.
    assert image.constant_bytes == unique_total < per_method_total
    assert unique_total <= header.data_size < unique_total + fmt.ALIGN * len(uniques)
    assert len(blob) == header.data_offset + header.data_size
    # The encoder's first weight (used by forward and encode) appears once in the file.
    enc_weight = max(uniques, key=len)
    assert blob.count(enc_weight) == 1


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_every_method_runs_with_parity_on_host(tmp_path_factory, quantize: str) -> None:
    methods = two_methods(tmp_path_factory, quantize)
    prog = Program.load(program_from(methods).program)
    assert prog.method_names == ["forward", "encode", "decode"]
    for m in methods:
        for x in m.model.spec.test_inputs:
            enc = m.model.encode_inputs(x)
            for got, want in zip(prog.method(m.name).run_raw(*enc), m.model.run_raw_c(*x)):
                assert same_bits(got, want), m.name


# --- external weights -----------------------------------------------------------------------------------------


def test_external_weights_parity_and_foreign_weights_rejected(compiled, tmp_path) -> None:
    cm = compiled("resnet8", quantize="int8")
    image = cm.program_image(external_weights=True, weights_name="resnet8.mpw")
    inline = cm.program_image()
    assert image.weights is not None and len(image.program) < len(inline.program) // 4
    x = cm.encode_inputs(cm.spec.test_inputs[0])
    got = Program.load(image.program, weights=image.weights).method("forward").run_raw(*x)
    want = Program.load(inline.program).method("forward").run_raw(*x)
    assert all(same_bits(a, b) for a, b in zip(got, want))
    # Another model's weights (same format, valid file) are refused by content id, with the fix in the hint.
    other = compiled("ds_cnn", quantize="int8").program_image(external_weights=True).weights
    with pytest.raises(ProgramError) as err:
        Program.load(image.program, weights=other)
    assert err.value.status == STATUS["weights mismatch"]
    assert "weights file written with the program" in str(err.value)
    # Missing weights, and a damaged weights file.
    assert _status(image.program) == STATUS["weights mismatch"]
    damaged = bytearray(image.weights)
    damaged[len(damaged) // 2] ^= 0x10
    # (the weights file's own CRC fails: reported against the weights, not the program)
    assert _status(image.program, weights=bytes(damaged)) == STATUS["weights corrupt"]
    # Loaded by path, the program finds <name>.mpw beside it.
    (tmp_path / "resnet8.mpk").write_bytes(image.program)
    (tmp_path / "resnet8.mpw").write_bytes(image.weights)
    by_path = Program.load(tmp_path / "resnet8.mpk").method("forward").run_raw(*x)
    assert all(same_bits(a, b) for a, b in zip(by_path, want))


def test_cli_exports_program_files(tmp_path) -> None:
    path = model_file(tmp_path, "autoencoder", TWO_METHOD_MODEL)
    proc = mcu_in_process("export", "--format", "program", "--quantize", "none", str(path),
                          "-o", str(tmp_path / "ae.mpk"))
    assert proc.returncode == 0, proc.stderr
    assert "methods: forward" in proc.stdout and "encode" in proc.stdout
    prog = Program.load(tmp_path / "ae.mpk")
    assert prog.method_names == ["forward", "encode", "decode"]
    proc = mcu_in_process("export", "--format", "program", "--external-weights", "--quantize", "none", str(path),
                          "-o", str(tmp_path / "ext" / "ae.mpk"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ext" / "ae.mpw").is_file()
    z = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    a = Program.load(tmp_path / "ext" / "ae.mpk").method("decode").run_raw(z)
    b = prog.method("decode").run_raw(z)
    assert same_bits(a[0], b[0])
    proc = mcu_in_process("export", str(path), "-o", str(tmp_path / "lib"))
    assert proc.returncode != 0 and "needs --board" in proc.stderr


def _program_function(cm, step) -> str:
    """The kernel a program file runs for a generated-C step: the optimized backend's packed kernel (DSP
    cores, generated C only) gives way to the portable kernel of the same op."""
    from mcu.backends.portable.variants import select_variant

    if step.call.function != "mcu_conv2d_packed_s8":
        return step.call.function
    op = next(o for o in cm.graph.ops if o.name == step.name)
    return select_variant(op, False, program=True).function


@pytest.mark.skipif(__import__("shutil").which("flatc") is None,
                    reason="flatc not installed (Debian: sudo apt-get install flatbuffers-compiler)")
def test_flatc_reads_our_files_with_the_schema(compiled, tmp_path) -> None:
    """The schema is the contract: flatc's generated reader sees exactly what the writer meant."""
    import importlib
    import subprocess
    import sys

    subprocess.run(["flatc", "--python", "-o", str(tmp_path), str(ROOT / "runtime_c/schema/program.fbs")], check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        fb_program = importlib.import_module("mcu_program.Program").Program
    finally:
        sys.path.remove(str(tmp_path))
    cm = compiled("ds_cnn", quantize="int8")
    blob = cm.program_image(bundle_tests=True).program
    header = fmt.read_header(blob)
    fb = blob[header.fb_offset:header.fb_offset + header.fb_size]
    assert fb_program.ProgramBufferHasIdentifier(fb, 0)
    root = fb_program.GetRootAs(fb, 0)
    assert root.FormatVersion() == fmt.FORMAT_VERSION and root.MethodsLength() == 1
    method = root.Methods(0)
    assert method.Name() == b"forward" and method.BundledLength() == len(cm.spec.test_inputs)
    assert list(method.ArenaSizesAsNumpy()) == [a.plan.arena_size for a in cm.memory.arenas]
    assert method.InstructionsLength() == len(cm.library.view.steps)
    kernels = [method.Instructions(i).Kernel() for i in range(method.InstructionsLength())]
    assert kernels == [fmt.KERNEL_IDS[_program_function(cm, s)] for s in cm.library.view.steps]
    x = method.Tensors(method.Inputs(0))
    assert (x.Offset(), x.Nbytes()) == (cm.memory.offset(cm.graph.inputs[0]), cm.graph.inputs[0].nbytes)
    assert list(x.DimOrderAsNumpy()) == list(cm.graph.inputs[0].dim_order)
    for i in range(root.SegmentsLength()):
        seg = root.Segments(i)
        assert seg.Offset() % fmt.ALIGN == 0 and seg.Offset() + seg.Size() <= header.data_size


class _StackedSteps(torch.nn.Module):
    """A cell stepped in a Python loop with every step's state kept: torch.stack of 24 steps, one concat of
    more inputs than a program instruction holds."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(1, 6)
        steps = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            steps.append(h)
        return torch.stack(steps, dim=1)


def test_a_concat_of_more_inputs_than_an_instruction_holds_is_written_in_parts() -> None:
    """Each part writes its own range of the output (one outer row), and the program equals the generated C."""
    import mcu

    torch.manual_seed(0)
    x = torch.randn(1, 24, 4)
    cm = mcu.compile(_StackedSteps().eval(), (x,), test_inputs=[(torch.randn(1, 24, 4),)])
    concat = [op for op in cm.graph.ops if op.kind == "concat"]
    assert concat and len(concat[-1].inputs) + 1 > fmt.MAX_OPERANDS
    assert_program_equals_generated_c(cm, vectors=1)
    out = Program.load(cm.program_image().program).method("forward").run_raw(*cm.encode_inputs((x,)))
    np.testing.assert_allclose(np.asarray(out[0]).reshape(1, 24, 6), cm.eager(x)[0].numpy(), atol=1e-5)
