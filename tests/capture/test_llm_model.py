"""The tiny language model (examples/tiny_llm.py): the committed checkpoint, the two entry
points sharing a KV cache, and what torch.export makes of them. Nothing here trains."""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest
import torch

from mcu.program.methods import defines_methods, load_methods
from repo import EXAMPLES


@pytest.fixture(scope="module")
def llm():
    spec = importlib.util.spec_from_file_location("tiny_llm_under_test", EXAMPLES / "tiny_llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checkpoint_is_small_and_says_how_it_was_made(llm) -> None:
    assert (EXAMPLES / "tiny_llm.pt").stat().st_size < 2 * 1024 * 1024
    meta = llm.training
    params = sum(p.numel() for p in llm.model.parameters())
    assert meta["parameters"] == params and 400_000 < params < 500_000
    # a trained model: far below the 6.0 bits of a uniform guess over the vocabulary, and int4 close to fp32
    assert meta["fp32_bits_per_char"] < 2.6
    assert 0 <= meta["int4_bits_per_char"] - meta["fp32_bits_per_char"] < 0.1
    assert len(llm.chars) == llm.model.cfg.vocab and llm.decode_text(llm.encode(llm.prompt)) == llm.prompt


def test_prefill_and_decode_equal_the_full_forward(llm) -> None:
    model = llm.model
    tokens = torch.tensor([llm.encode("And God said, Let there be light: and there was light.")])
    with torch.no_grad():
        full = model(tokens)[0]
        model.reset_cache()
        cut = 20
        torch.testing.assert_close(model.prefill(tokens[:, :cut], torch.arange(cut)), full[cut - 1:cut],
                                   rtol=1e-5, atol=1e-5)
        for i in range(cut, tokens.shape[1]):
            step = model.decode(tokens[:, i:i + 1], torch.tensor([i]))
            torch.testing.assert_close(step, full[i:i + 1], rtol=1e-5, atol=1e-5)


def test_greedy_generation_is_text(llm) -> None:
    text = llm.reference_text(64)
    assert len(text) == 64 and llm.generate_tokens >= 64
    words = text.split()
    assert len(words) >= 8 and sum(w.strip(",.;:").isalpha() for w in words) >= len(words) * 0.7, text


def _dynamic_prompt() -> tuple:
    """The chunk length T of prefill(tokens[1, T], pos[T]) free in [2, 127] (the method takes *args)."""
    t = torch.export.Dim("T", min=2, max=127)
    return (({1: t}, {0: t}),)


def _ops(ep: torch.export.ExportedProgram) -> Counter:
    return Counter(str(n.target) for n in ep.graph.nodes if n.op == "call_function")


def _mutated(ep: torch.export.ExportedProgram) -> list[str]:
    return [s.target for s in ep.graph_signature.output_specs if s.kind.name == "BUFFER_MUTATION"]


def test_both_methods_export_and_write_the_cache_with_index_put() -> None:
    assert defines_methods(EXAMPLES / "tiny_llm.py")
    methods = dict(load_methods(EXAMPLES / "tiny_llm.py"))
    assert set(methods) == {"prefill", "decode"}
    caches = {f"owner.blocks.{i}.attn.{kv}_cache" for i in range(4) for kv in "kv"}
    for name, spec in methods.items():
        dynamic = _dynamic_prompt() if name == "prefill" else None
        ep = torch.export.export(spec.model, spec.example_inputs, dynamic_shapes=dynamic, strict=False)
        ep = ep.run_decompositions()
        ops = _ops(ep)
        assert set(_mutated(ep)) == caches, name
        # one write of the new positions per cache, never a whole-cache select (slicing or index_copy_)
        assert ops["aten.index_put.default"] == 8, name
        assert ops["aten.where.self"] == 4, name  # the attention masks, over [heads, T, context] scores
        for node in ep.graph.nodes:
            if node.target == torch.ops.aten.where.self:
                assert tuple(node.meta["val"].shape)[-1] == 128 and node.meta["val"].shape[0] == 4


def test_exported_prefill_runs_other_prompt_lengths(llm) -> None:
    spec = dict(load_methods(EXAMPLES / "tiny_llm.py"))["prefill"]
    ep = torch.export.export(spec.model, spec.example_inputs,
                             dynamic_shapes=_dynamic_prompt(), strict=False)
    tokens = torch.tensor([llm.encode("And the evening and the morning were the third day.")])
    with torch.no_grad():
        llm.model.reset_cache()
        pos = torch.arange(tokens.shape[1])
        want = llm.model.prefill(tokens, pos)
    torch.testing.assert_close(ep.module()(tokens, pos), want, rtol=1e-5, atol=1e-5)
