"""A GRU returning (output, h_n)."""
import torch
from torch import nn

torch.manual_seed(0)


class GruHn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(8, 16, num_layers=2)

    def forward(self, x):
        return self.gru(x)


model = GruHn().eval()
example_inputs = (torch.randn(12, 1, 8),)
calibration = [(torch.randn(12, 1, 8),) for _ in range(16)]
test_inputs = [(torch.randn(12, 1, 8),) for _ in range(3)]
