"""A language model on a microcontroller: a 470k-parameter character-level decoder.

Trained here on the King James Bible (examples/tiny_llm_train.py, fixed seed; the checkpoint
examples/tiny_llm.pt is committed so nothing trains at build or test time). Two methods share the
weights and a KV cache (buffers the methods mutate with ``index_put_``, state that lives across calls):

- ``prefill(tokens[1, C], pos[C])``: C prompt characters at positions ``pos``; fills the cache, returns
  the logits of the next character [1, vocab]. A prompt runs as chunks of C (``prefill_chunk``), its
  remainder through decode.
- ``decode(token[1, 1], pos[1])``: one character at position ``pos``; one cache write, the next logits.

``prompt``, ``generate_tokens`` and the character table ``chars`` tell a generation loop what to run;
``reference_text()`` is the greedy continuation computed by PyTorch.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
CHECKPOINT = _HERE / "tiny_llm.pt"


def _architecture():
    """examples/tiny_llm_model.py, imported by path (mcu loads this file without its folder on sys.path)."""
    name = "tiny_llm_model"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _HERE / "tiny_llm_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


_arch = _architecture()
_ckpt = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)

chars: str = _ckpt["chars"]
"""The tokenizer: token i is the character chars[i]."""
training: dict = _ckpt["meta"]
"""How the checkpoint was made and what it measures (bits per character fp32 and int4, parameters, seconds)."""

model = _arch.TinyLlm(_arch.LlmConfig(**_ckpt["config"]))
model.load_state_dict({k: v.float() for k, v in _ckpt["state_dict"].items()})
model.eval().requires_grad_(False)

prompt = "In the beginning"
generate_tokens = 64
prefill_chunk = 1
"""Prompt characters per prefill call: RAM against speed. Every row of a chunk is live at once (scores
over the context, the MLP's 384 features), so prefill's working memory grows by about 4.6 KB per
character (measured, int4-weight: 4,612 B at 1, 18,448 B at 4, 73,792 B at 16) while batching saves
only 1.1 % (4) to 1.5 % (16) of the instructions per character on mps2-an505 (4,612,929 at 1). At 1
the arena is the KV cache plus decode's working set; `--prefill-chunk` overrides."""
quantize = "int4-weight"
"""What `--quantize auto` (the default) runs: torchao's 4-bit groupwise weights (PerGroup(32)), fp32 activations."""


def encode(text: str) -> list[int]:
    return [chars.index(c) for c in text]


def decode_text(tokens: list[int]) -> str:
    return "".join(chars[t] for t in tokens)


prompt_tokens = torch.tensor([encode(prompt)])
methods = {
    "prefill": {"fn": model.prefill, "example_inputs": (prompt_tokens, torch.arange(len(prompt)))},
    "decode": {"fn": model.decode,
               "example_inputs": (torch.tensor([[encode(" ")[0]]]), torch.tensor([len(prompt)]))},
}


def reference_text(count: int = generate_tokens) -> str:
    """PyTorch's greedy continuation of the prompt (resets the cache first)."""
    return decode_text(_arch.greedy(model, encode(prompt), count))
