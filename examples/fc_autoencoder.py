"""The fully connected autoencoder for anomaly detection (MLPerf Tiny): 640 in, 640 out."""

import torch
from torch import nn

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


def _randomize_batch_norm(module: nn.Module) -> None:
    for m in module.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


model = FCAutoencoder()
_randomize_batch_norm(model)
model.eval()
example_inputs = (torch.randn(1, 640),)
calibration = [(torch.randn(1, 640),) for _ in range(16)]
test_inputs = [(torch.randn(1, 640),) for _ in range(3)]
