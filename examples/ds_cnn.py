"""DS-CNN keyword spotting (MLPerf Tiny): 49x10 MFCC input, 12 classes, random weights."""

import torch
from torch import nn

from _init import randomize_batch_norm

torch.manual_seed(0)


def conv_bn_relu(cin: int, cout: int, kernel, stride=1, padding=0, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU())


class DSCNN(nn.Module):
    def __init__(self, channels: int = 64, classes: int = 12) -> None:
        super().__init__()
        layers = [conv_bn_relu(1, channels, (10, 4), stride=2, padding=(5, 1))]
        for _ in range(4):
            layers.append(conv_bn_relu(channels, channels, 3, padding=1, groups=channels))
            layers.append(conv_bn_relu(channels, channels, 1))
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


model = DSCNN()
randomize_batch_norm(model)
model.eval()
example_inputs = (torch.randn(1, 1, 49, 10),)
calibration = [(torch.randn(1, 1, 49, 10),) for _ in range(16)]
test_inputs = [(torch.randn(1, 1, 49, 10),) for _ in range(3)]
