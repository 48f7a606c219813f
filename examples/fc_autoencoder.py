"""The fully connected autoencoder for anomaly detection (MLPerf Tiny): 640 in, 640 out."""

import torch
from torch import nn

from _init import randomize_batch_norm

torch.manual_seed(0)

SIZES = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]


class FCAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin, cout in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Linear(cin, cout), nn.BatchNorm1d(cout), nn.ReLU()]
        layers.append(nn.Linear(SIZES[-1], 640))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


model = FCAutoencoder()
randomize_batch_norm(model)
model.eval()
example_inputs = (torch.randn(1, 640),)
calibration = [(torch.randn(1, 640),) for _ in range(16)]
test_inputs = [(torch.randn(1, 640),) for _ in range(3)]
