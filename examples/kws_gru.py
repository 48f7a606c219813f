"""GRU keyword spotter: 49 frames x 10 MFCC coefficients (batch_first), a two-layer GRU,
the last step's state through a linear layer to 12 classes. Seeded random weights."""

import torch
from torch import nn

torch.manual_seed(0)


class KwsGRU(nn.Module):
    def __init__(self, features: int = 10, hidden: int = 32, classes: int = 12) -> None:
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.gru(x)
        return self.classifier(seq[:, -1])


model = KwsGRU().eval()
example_inputs = (torch.randn(1, 49, 10),)
calibration = [(torch.randn(1, 49, 10),) for _ in range(16)]
test_inputs = [(torch.randn(1, 49, 10),) for _ in range(3)]
class_names = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "silence", "unknown"]
