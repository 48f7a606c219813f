"""The tiny character-level decoder of examples/tiny_llm.py, without weights or side effects.

A pre-norm transformer decoder: learned token and position embeddings, ``n_layer`` blocks of
RMSNorm -> 4-head causal self-attention and RMSNorm -> GELU MLP, a final RMSNorm and a linear head.
``forward`` runs whole sequences for training. ``prefill`` and ``decode`` are the two entry points a
device runs: they share one KV cache per layer, registered as buffers and written with
``index_put_`` at the new positions only, in the layouts the attention products read without a
transpose: keys as [heads, head_dim, context] (scores = q @ K), values as [heads, context, head_dim]
(out = p @ V). Attention spans the whole cache with a mask (key position <= query position), so every
shape but the prompt length is static.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlmConfig:
    vocab: int
    d_model: int = 96
    n_layer: int = 4
    n_head: int = 4
    context: int = 128
    d_mlp: int = 384

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Attention(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.d_model // cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        # Not part of the checkpoint: the state a device keeps between prefill and decode calls.
        self.register_buffer("k_cache", torch.zeros(cfg.n_head, self.head_dim, cfg.context), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cfg.n_head, cfg.context, self.head_dim), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Training: x [B, T, d] attends causally within itself."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def cached(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x [T, d] at absolute positions pos [T]: writes K and V at pos, attends over the cache."""
        t, d = x.shape
        h, hd = self.n_head, self.head_dim
        q, k, v = self.qkv(x).view(t, 3, h, hd).unbind(1)            # each [T, H, hd]
        self.k_cache[:, :, pos] = k.permute(1, 2, 0)
        self.v_cache[:, pos] = v.transpose(0, 1)
        scores = (q.transpose(0, 1) * (1.0 / math.sqrt(hd))) @ self.k_cache    # [H, T, ctx]
        keys = torch.arange(self.k_cache.shape[-1])
        scores = torch.where(keys.view(1, -1) <= pos.view(-1, 1), scores, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ self.v_cache                      # [H, T, hd]
        return self.proj(y.transpose(0, 1).reshape(t, d))


class Block(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, cfg.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def cached(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.attn.cached(self.norm1(x), pos)
        return x + self.mlp(self.norm2(x))


class TinyLlm(nn.Module):
    def __init__(self, cfg: LlmConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.context, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.d_model, eps=1e-5)
        self.head = nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Training and evaluation: tokens [B, T] -> logits [B, T, vocab]."""
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def _cached(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens[0]) + self.pos(pos)                               # [T, d]
        for block in self.blocks:
            x = block.cached(x, pos)
        return self.head(self.norm(x[-1:]))                                  # [1, vocab]

    def prefill(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """tokens [1, C] at positions pos [C] (consecutive): a chunk of the prompt into the cache; returns
        the logits [1, vocab] after its last token. A prompt runs as chunks of C (the compiled length)."""
        return self._cached(tokens, pos)

    def decode(self, token: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """token [1, 1] at position pos [1] (after prefill): one cache write, the next logits [1, vocab]."""
        return self._cached(token, pos)

    def reset_cache(self) -> None:
        for block in self.blocks:
            block.attn.k_cache.zero_()
            block.attn.v_cache.zero_()


def greedy(model: TinyLlm, prompt: list[int], count: int) -> list[int]:
    """The reference generation loop: prefill the prompt, then ``count`` greedy decode steps."""
    model.reset_cache()
    with torch.no_grad():
        logits = model.prefill(torch.tensor([prompt]), torch.arange(len(prompt)))
        out: list[int] = []
        for i in range(count):
            out.append(int(logits.argmax(-1)))
            logits = model.decode(torch.tensor([[out[-1]]]), torch.tensor([len(prompt) + i]))
    return out
