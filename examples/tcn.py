"""A temporal convolutional network: residual blocks of dilated causal Conv1d (dilation
1, 2, 4; the causal padding as a left F.pad), ReLU, a 1x1 Conv1d on the residual where channels
change, mean over time and a linear classifier to 4 classes. [1, 8, 64] input (8 sensor channels,
64 steps), seeded random weights."""

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class CausalBlock(nn.Module):
    def __init__(self, cin: int, cout: int, dilation: int, kernel: int = 3) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, kernel, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, kernel, dilation=dilation)
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(F.pad(x, (self.pad, 0))))
        y = F.relu(self.conv2(F.pad(y, (self.pad, 0))))
        return F.relu(y + self.skip(x))


class TCN(nn.Module):
    def __init__(self, cin: int = 8, channels: int = 16, classes: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(CausalBlock(cin, channels, 1), CausalBlock(channels, channels, 2),
                                    CausalBlock(channels, channels, 4))
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.blocks(x).mean(dim=2))


model = TCN().eval()
example_inputs = (torch.randn(1, 8, 64),)
calibration = [(torch.randn(1, 8, 64),) for _ in range(16)]
test_inputs = [(torch.randn(1, 8, 64),) for _ in range(3)]
