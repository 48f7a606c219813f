"""The w8a16 attention and normalisation models of tests/quantize/test_w8a16_attention.py and
bench/w8a16_attention.py, as users write them: nn.MultiheadAttention (batch_first, with and without the weights),
a transformer encoder layer built by hand with a log-softmax head, and nn.RMSNorm between two linear layers."""

from __future__ import annotations

import functools

import torch
from torch import nn

import mcu
from mcu.api import LoweredModel, lower

MODELS = ["mha", "mha_weights", "encoder", "rms", "pos", "causal", "masked"]
D, T = 16, 6


class Mha(nn.Module):
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, w = self.attn(x, x, x, need_weights=self.need_weights)
        return torch.cat([y, w], dim=-1) if self.need_weights else y


class Encoder(nn.Module):
    """A pre-norm encoder layer and a classifier head over each position."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Linear(32, D))
        self.head = nn.Linear(D, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return nn.functional.log_softmax(self.head(x), dim=-1)


class Rms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.norm, self.b = nn.Linear(D, 24), nn.RMSNorm(24), nn.Linear(24, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.norm(self.a(x)))


class Pos(nn.Module):
    """A learned position embedding added to the tokens: an add with a constant operand of the same shape."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, T, D) * 0.5)
        self.fc = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x + self.pos)


class CausalBlock(nn.Module):
    """A pre-norm causal transformer block: nn.MultiheadAttention with a boolean causal mask (a buffer), a GELU
    MLP, both residual."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 2, batch_first=True)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))
        self.mlp = nn.Sequential(nn.Linear(D, 32), nn.GELU(), nn.Linear(32, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class MaskedScores(nn.Module):
    """Single-head attention written by hand: the scores masked with ``torch.where`` on a kept-positions buffer
    (causal, the last key also hidden from the first three queries) and ``masked_fill`` on a padding buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        keep = torch.ones(T, T, dtype=torch.bool).tril()
        keep[:3, -1] = False
        self.register_buffer("keep", keep)
        self.register_buffer("pad", torch.tensor([False] * (T - 1) + [True]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.q(x) @ self.k(x).transpose(-2, -1) * D ** -0.5
        s = torch.where(self.keep, s, float("-inf"))
        w = torch.softmax(s, dim=-1)
        s2 = (self.q(x) @ self.v(x).transpose(-2, -1)).masked_fill(self.pad, float("-inf"))
        return w @ self.v(x) + torch.softmax(s2, dim=-1) @ self.k(x)


KINDS = {"mha": {"bmm", "softmax"}, "mha_weights": {"bmm", "softmax"}, "encoder": {"bmm", "layer_norm", "log_softmax"},
         "rms": {"layer_norm"}, "pos": {"add"}, "causal": {"bmm", "softmax", "layer_norm"},
         "masked": {"bmm", "softmax"}}
# the masked softmaxes (mcu_softmax_masked_s16 at w8a16) of the masked models
MASKED = {"causal": 1, "masked": 2}


def build(name: str) -> nn.Module:
    torch.manual_seed(11)
    model = {"mha": lambda: Mha(False), "mha_weights": lambda: Mha(True), "encoder": Encoder, "rms": Rms,
             "pos": Pos, "causal": CausalBlock, "masked": MaskedScores}[name]()
    with torch.no_grad():  # (trained-looking affine parameters, not the initial ones and zeros)
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.RMSNorm)):
                m.weight.uniform_(0.5, 1.5)
                if getattr(m, "bias", None) is not None:
                    m.bias.uniform_(-0.2, 0.2)
    return model.eval()


@functools.lru_cache(maxsize=None)
def lowered(name: str, quantize: str) -> LoweredModel:
    """The model seeded, calibrated and lowered once per process for each name and mode (all that decides it)."""
    model = build(name)
    torch.manual_seed(3)
    # (enough calibration that the test inputs stay inside its ranges: clipping would hide the modes' difference)
    calibration = [(torch.randn(1, T, D),) for _ in range(32)]
    tests = [(torch.randn(1, T, D) * 0.8,) for _ in range(3)]
    return lower(model, calibration[0], quantize=quantize, calibration=calibration, test_inputs=tests, name=name)


def compile_model(name: str, quantize: str, board: str = "mps2-an505") -> mcu.CompiledModel:
    return lowered(name, quantize).compile(board)
