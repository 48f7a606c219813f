"""Tiny vision transformers written the ways users write attention: ``nn.MultiheadAttention`` (batch first
or sequence first) and ``F.scaled_dot_product_attention`` with the query, key and value from one Linear
split apart. Each has a convolutional patch embedding, a learned class token joined with ``torch.cat``, a
learned position embedding, two pre-norm encoder blocks with a GELU MLP and a classifier on the class token.
Seeded random weights; inputs are standard normal images, as the calibration set."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MhaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, batch_first: bool, need_weights: bool) -> None:
        super().__init__()
        self.batch_first, self.need_weights = batch_first, need_weights
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=batch_first)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.batch_first:
            x = x.transpose(0, 1)  # [tokens, batch, dim], the module's default layout
        out, _ = self.mha(x, x, x, need_weights=self.need_weights)
        return out if self.batch_first else out.transpose(0, 1)


class SdpaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, split: str) -> None:
        super().__init__()
        self.heads, self.split = heads, split
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        if self.split == "chunk":
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        else:
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, attn: nn.Module, dim: int) -> None:
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(dim), attn, nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """``attention``: ``mha`` (batch_first=True, need_weights=False), ``mha-seq`` (batch_first=False, the
    default need_weights=True), ``mha-seq-fast`` (batch_first=False, need_weights=False), ``sdpa`` (qkv
    chunked) or ``sdpa-unbind`` (qkv viewed, permuted and unbound)."""

    def __init__(self, attention: str = "mha", image: int = 16, patch: int = 4, dim: int = 32, heads: int = 2,
                 depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(1, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.1)

        def attn() -> nn.Module:
            if attention.startswith("mha"):
                return MhaAttention(dim, heads, batch_first=attention == "mha",
                                    need_weights=attention == "mha-seq")
            return SdpaAttention(dim, heads, split="unbind" if attention == "sdpa-unbind" else "chunk")

        self.blocks = nn.Sequential(*[Block(attn(), dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.blocks(x)
        return self.head(self.norm(x)[:, 0])


def _same_weights(model: TinyViT, mha: TinyViT) -> None:
    """``model`` (an SDPA form) computes what ``mha`` does: its qkv and output projections are the module's."""
    state = {}
    for name, value in mha.state_dict().items():
        name = name.replace("attn.mha.in_proj_", "attn.qkv.").replace("attn.mha.out_proj.", "attn.proj.")
        state[name] = value
    model.load_state_dict(state)


def vit(attention: str) -> tuple[nn.Module, tuple, list, list]:
    """The model, example inputs, calibration (12 standard normal images) and 3 test inputs, all seeded. Every
    form has the same weights (nn.MultiheadAttention's initialisation), so they compute the same function."""
    torch.manual_seed(0)
    model = TinyViT(attention).eval()
    if not attention.startswith("mha"):
        torch.manual_seed(0)
        _same_weights(model, TinyViT("mha"))
    gen = torch.Generator().manual_seed(1)
    images = [(torch.randn(1, 1, 16, 16, generator=gen),) for _ in range(15)]
    return model, images[0], images[:12], images[12:]
