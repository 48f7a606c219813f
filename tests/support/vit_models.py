"""Tiny vision transformers written the ways users write attention: ``nn.MultiheadAttention`` (batch first
or sequence first) and ``F.scaled_dot_product_attention`` with the query, key and value from one Linear
split apart. Each has a convolutional patch embedding, a learned class token joined with ``torch.cat``, a
learned position embedding, two pre-norm encoder blocks with a GELU MLP and a classifier on the class token.
Seeded random weights; inputs are standard normal images, as the calibration set.

``masked_vit`` adds a mask held in the model's buffers, written each way users write one: ``attn_mask=`` bool
or float (zeros and -inf) to nn.MultiheadAttention, ``key_padding_mask=``, a bool ``attn_mask=`` or
``is_causal=True`` to F.scaled_dot_product_attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def local_hidden(tokens: int, reach: int = 6) -> torch.Tensor:
    """Which token pairs a local attention hides: patches further apart than ``reach`` positions; the class
    token (0) sees and is seen by every token."""
    i = torch.arange(tokens)
    far = (i[:, None] - i[None, :]).abs() > reach
    far[0, :] = False
    far[:, 0] = False
    return far


class MhaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, batch_first: bool, need_weights: bool, mask: str = "",
                 tokens: int = 17) -> None:
        super().__init__()
        self.batch_first, self.need_weights, self.mask = batch_first, need_weights, mask
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=batch_first)
        hidden = local_hidden(tokens)
        self.register_buffer("bool_mask", hidden, persistent=False)  # True: may not attend (nn.MultiheadAttention's meaning)
        self.register_buffer("float_mask", torch.zeros(tokens, tokens).masked_fill(hidden, float("-inf")),
                             persistent=False)
        self.register_buffer("padding", torch.arange(tokens)[None, :] >= tokens - 3, persistent=False)  # the last 3 are padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.batch_first:
            x = x.transpose(0, 1)  # [tokens, batch, dim], the module's default layout
        masks = {"bool": {"attn_mask": self.bool_mask}, "float": {"attn_mask": self.float_mask},
                 "padding": {"key_padding_mask": self.padding}}.get(self.mask, {})
        out, _ = self.mha(x, x, x, need_weights=self.need_weights, **masks)
        return out if self.batch_first else out.transpose(0, 1)


class SdpaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, split: str, mask: str = "", tokens: int = 17) -> None:
        super().__init__()
        self.heads, self.split, self.mask = heads, split, mask
        self.register_buffer("keep", ~local_hidden(tokens), persistent=False)  # True: takes part (SDPA's meaning)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        if self.split == "chunk":
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        else:
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        if self.mask == "causal":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.mask == "bool":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.keep)
        else:
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
                 depth: int = 2, classes: int = 10, mask: str = "") -> None:
        super().__init__()
        self.embed = nn.Conv2d(1, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.1)
        tokens = (image // patch) ** 2 + 1
        self.causal = mask == "causal"

        def attn() -> nn.Module:
            if attention.startswith("mha"):
                return MhaAttention(dim, heads, batch_first=attention == "mha",
                                    need_weights=attention == "mha-seq", mask=mask, tokens=tokens)
            return SdpaAttention(dim, heads, split="unbind" if attention == "sdpa-unbind" else "chunk", mask=mask,
                                 tokens=tokens)

        self.blocks = nn.Sequential(*[Block(attn(), dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        cls = self.cls.expand(x.shape[0], -1, -1)
        # under a causal mask a token sees those before it: the class token goes last, to see every patch
        x = torch.cat([x, cls] if self.causal else [cls, x], dim=1) + self.pos
        x = self.blocks(x)
        return self.head(self.norm(x)[:, -1 if self.causal else 0])


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


def masked_vit(attention: str, mask: str) -> tuple[nn.Module, tuple, list, list]:
    """:func:`vit` with a constant mask: ``mask`` one of ``bool``, ``float``, ``padding`` (nn.MultiheadAttention
    forms) or ``bool``, ``causal`` (F.scaled_dot_product_attention forms); the same weights as :func:`vit`."""
    torch.manual_seed(0)
    model = TinyViT(attention, mask=mask).eval()
    torch.manual_seed(0)
    reference = TinyViT("mha")
    if attention.startswith("mha"):
        model.load_state_dict(reference.state_dict())
    else:
        _same_weights(model, reference)
    gen = torch.Generator().manual_seed(1)
    images = [(torch.randn(1, 1, 16, 16, generator=gen),) for _ in range(15)]
    return model, images[0], images[:12], images[12:]
