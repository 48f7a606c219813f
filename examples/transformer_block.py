"""A small vision transformer block: 4x4 patches of a 16x16 image embedded by a strided
convolution, learned positions, two-head self-attention written with matmul and softmax, LayerNorm,
a GELU MLP, mean pooling over the tokens and a linear classifier to 10 classes. Seeded random weights."""

import torch
from torch import nn

torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.head_dim ** -0.5, dim=-1)
        out = torch.matmul(att, v).transpose(1, 2).reshape(b, n, d)
        return self.proj(out)


class TransformerBlock(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 32, heads: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(1, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2, dim) * 0.1)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(dim=1))


model = TransformerBlock().eval()
example_inputs = (torch.randn(1, 1, 16, 16),)
calibration = [(torch.randn(1, 1, 16, 16),) for _ in range(16)]
test_inputs = [(torch.randn(1, 1, 16, 16),) for _ in range(3)]
