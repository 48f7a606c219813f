"""The small CNN from the PyTorch Mobile docs: 1x28x28 digits-sized input, 10 classes."""

import torch
from torch import nn

torch.manual_seed(0)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


model = SmallCNN().eval()
example_inputs = (torch.randn(1, 1, 28, 28),)
calibration = [(torch.randn(1, 1, 28, 28),) for _ in range(16)]
test_inputs = [(torch.randn(1, 1, 28, 28),) for _ in range(3)]
