"""Bidirectional GRU classifier, batch_first: the last step's forward state and the first step's backward one."""
import torch
from torch import nn

torch.manual_seed(0)


class BiGru(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(10, 20, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(40, 5)

    def forward(self, x):
        seq, _ = self.gru(x)
        return self.head(seq.mean(dim=1))


model = BiGru().eval()
example_inputs = (torch.randn(1, 16, 10),)
calibration = [(torch.randn(1, 16, 10),) for _ in range(16)]
test_inputs = [(torch.randn(1, 16, 10),) for _ in range(3)]
