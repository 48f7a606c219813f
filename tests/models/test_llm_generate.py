"""Text generation with the tiny LLM: `mcu run` generates 64 tokens on the simulated M33 equal
to the Python reference (torchao's int4 model in PyTorch) and to the host build; top-k sampling with a
fixed seed agrees too; the firmware fits a Pico 2; the KV cache is never copied."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_runner import mcu_in_process
from mcu.generate import (Sampler, build_generation_firmware, compile_generation, host_tokens, load_generation,
                          lower_generation, reference_tokens, run_generation_firmware)
from repo import EXAMPLES, requires_qemu
from state_checks import reads_whole_state_into_a_copy

# Whole models end to end: the full run only (make test), not make test-fast.
pytestmark = pytest.mark.slow

LLM = EXAMPLES / "tiny_llm.py"


@pytest.fixture(scope="module")
def lowered():
    """tiny_llm's methods captured and quantized once, compiled for each board and chunk."""
    gf = load_generation(LLM)
    return gf, lower_generation(gf, "auto")


@pytest.fixture(scope="module")
def generation(lowered):
    gf, methods = lowered
    return compile_generation(gf, "mps2-an505", "auto", lowered=methods)


@requires_qemu
def test_mcu_run_generates_the_reference_tokens_on_the_simulated_m33() -> None:
    proc = mcu_in_process("run", "--board", "mps2-an505", str(LLM), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["passed"] and r["quantize"] == "int4-weight"
    assert len(r["tokens"]) >= 64
    assert r["tokens"] == r["reference_tokens"] == r["host_tokens"]
    assert len(r["decode_instructions"]) == len(r["tokens"]) - 1
    assert len(r["prompt_call_instructions"]) == len(r["prompt"]) // r["prefill_chunk"] + len(r["prompt"]) % r["prefill_chunk"]
    words = r["text"].split()
    assert len(words) >= 8 and sum(w.strip(",.;:").isalpha() for w in words) >= 0.7 * len(words), r["text"]
    print(f"\n{r['prompt']!r} -> {r['text']!r}\nprefill {r['prefill_instructions']:,} instructions, decode "
          f"{sum(r['decode_instructions']) / len(r['decode_instructions']):,.0f} per token; flash {r['flash_bytes']:,} B, "
          f"RAM {r['ram_bytes']:,} B")


def test_host_build_generates_the_reference_tokens(generation) -> None:
    want = reference_tokens(generation.file, generation.quantize)
    assert host_tokens(generation) == want


@requires_qemu
def test_top_k_sampling_with_a_seed_agrees_on_the_device(generation) -> None:
    gf = dataclasses.replace(generation.file, top_k=5, seed=7, count=24)
    cg = dataclasses.replace(generation, file=gf)
    want = reference_tokens(gf, cg.quantize)
    greedy = reference_tokens(dataclasses.replace(gf, top_k=0), cg.quantize)
    assert want != greedy  # sampling does sample
    run = run_generation_firmware(cg, build_generation_firmware(cg, want))
    assert run.passed and run.tokens == want, run.console[-1500:]


def test_sampler_is_deterministic_and_stays_in_the_top_k() -> None:
    import numpy as np

    logits = np.array([0.0, 3.0, 2.5, -1.0, 2.9, 1.0], np.float32)
    draws = [Sampler(3, 11)(logits) for _ in range(5)]
    assert len(set(draws)) == 1  # same seed, same first draw
    s = Sampler(3, 11)
    picks = {s(logits) for _ in range(200)}
    assert picks == {1, 2, 4}
    assert Sampler(0, 1)(logits) == 1


def test_weights_are_4_bit_and_embeddings_8_bit(generation) -> None:
    for name, cm in generation.methods.items():
        kinds = [op.kind for op in cm.graph.ops]
        assert kinds.count("linear_w4") == 4 * 4 + 1, name  # qkv, proj, two MLP layers per block, the head
        assert kinds.count("embedding_s8") == 2, name  # tokens and positions, both run-time inputs
        assert "linear" not in kinds and "embedding" not in kinds, name
        assert not cm.graph.fallbacks, cm.graph.fallbacks


def test_the_kv_cache_is_shared_and_never_copied(generation) -> None:
    methods = generation.methods
    state = generation.state_bytes
    assert state == 4 * 2 * 96 * 128 * 4  # 4 layers, K and V, fp32
    for name, cm in methods.items():
        graph = cm.graph
        assert len(graph.state) == 8
        assert not reads_whole_state_into_a_copy(graph), name
        puts = [op for op in graph.ops if op.kind == "index_put"]
        assert len(puts) == 8 and all(op.output.base() is graph.state[op.attrs["state"]] for op in puts)
        # the arena is the state plus the method's own working set, packed to its live-set bound
        work = cm.memory.arena_size - state
        assert work <= 1.25 * (cm.memory.live_set - state) + 1024, (name, work, cm.memory.live_set - state)
    decode_work = methods["decode"].memory.arena_size - state
    assert decode_work < 49_152  # less than one layer's K cache: no copy of any state buffer is live
    # the library's one arena: the state plus decode's working set (prefill runs 1 token per call here)
    assert generation.file.chunk == 1
    assert generation.arena_bytes() == state + decode_work
    assert generation.library.view.arena_size == generation.arena_bytes()  # what the firmware reserves
    # both methods place every state buffer at the same offset (the library checks it too)
    offsets = [{n: cm.memory.offset(t) for n, t in cm.graph.state.items()} for cm in methods.values()]
    assert offsets[0] == offsets[1]


@pytest.mark.parametrize("chunk", [5, 16])
def test_prompt_chunks_of_any_length_generate_the_reference_tokens(generation, lowered, chunk: int) -> None:
    """A prompt of 16 in chunks of 5: three prefill calls and one decode call for the remainder; in one
    chunk of 16: one call. Prefill's working memory grows with the chunk (each row is live at once)."""
    gf = generation.file.with_chunk(chunk)
    assert gf.prompt_calls == (4 if chunk == 5 else 1)
    cg = compile_generation(gf, "mps2-an505", generation.quantize, lowered={"decode": lowered[1]["decode"]})
    assert host_tokens(cg) == reference_tokens(gf, cg.quantize)
    work = {name: cm.memory.arena_size - cg.state_bytes for name, cm in cg.methods.items()}
    assert work["prefill"] > (chunk - 1) * work["decode"]


def test_methods_lowered_for_another_chunk_or_mode_are_refused(lowered) -> None:
    from mcu.errors import McuError

    gf, methods = lowered
    with pytest.raises(McuError, match="method prefill was lowered from another model"):
        compile_generation(gf.with_chunk(5), "mps2-an505", "auto", lowered=methods)
    with pytest.raises(McuError, match="method prefill was lowered from another model or at"):
        compile_generation(gf, "mps2-an505", "none", lowered=methods)


def test_fits_a_pico2(lowered) -> None:
    gf, methods = lowered
    cg = compile_generation(gf, "pico2", "auto", lowered=methods)
    fw = build_generation_firmware(cg, [0] * cg.file.count)
    assert fw.uf2 is not None
    assert fw.flash_bytes <= 4 * 1024 * 1024 and fw.ram_bytes <= 520 * 1024
    print(f"\npico2: flash {fw.flash_bytes:,} B, RAM {fw.ram_bytes:,} B")


def test_the_program_file_generates_the_reference_tokens(generation) -> None:
    from mcu.generate import program_image, program_tokens

    image = program_image(generation)
    # one file for both methods: the weights once (int4 pairs + scales + fp32 embeddings ~ 350 KB), not twice
    assert len(image.program) < 600_000
    assert program_tokens(generation, image) == reference_tokens(generation.file, generation.quantize)


def test_kept_arenas_are_cleared_by_reset_state(generation) -> None:
    """Without reset_state a second prefill sees the first sequence's cache: same prompt, same logits only
    because prefill rewrites every position it reads; decode at a later position reads stale rows."""
    import numpy as np

    from mcu.generate import program_image
    from mcu.program.host import Program

    program = Program.load(program_image(generation).program)
    decode = program.method("decode")
    fresh = decode.run_raw(np.asarray([5], np.int32), np.asarray([3], np.int32), keep_state=True)[0]
    again = decode.run_raw(np.asarray([5], np.int32), np.asarray([3], np.int32), keep_state=True)[0]
    np.testing.assert_array_equal(fresh, again)  # position 3 rewritten, positions 0-2 still zero
    decode.run_raw(np.asarray([9], np.int32), np.asarray([0], np.int32), keep_state=True)  # writes position 0
    changed = decode.run_raw(np.asarray([5], np.int32), np.asarray([3], np.int32), keep_state=True)[0]
    assert not np.array_equal(changed, fresh)  # the state lived across calls
    program.reset_state()
    np.testing.assert_array_equal(decode.run_raw(np.asarray([5], np.int32), np.asarray([3], np.int32),
                                                 keep_state=True)[0], fresh)


@requires_qemu
def test_the_interpreter_firmware_generates_the_reference_tokens_from_the_program_file(generation) -> None:
    """The program file in the interpreter firmware's flash region: prefill and decode found by name, run
    on one arena (the KV cache kept between calls); same tokens as the Python reference."""
    from mcu.generate import run_program_generation

    want = reference_tokens(generation.file, generation.quantize)
    run = run_program_generation(generation, want)
    assert run.passed and run.tokens == want, run.console[-1500:]
    assert len(run.prompt_instructions) == generation.file.prompt_calls
    assert len(run.decode_instructions) == generation.file.count - 1
