"""MobileNetV1 width 0.25 for visual wake words (MLPerf Tiny): 96x96x3 input, 2 classes, ReLU6."""

import torch
from torch import nn

from _init import randomize_batch_norm

torch.manual_seed(0)


def conv_bn(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class MobileNetV1(nn.Module):
    # (output channels at width 1.0, stride) of each depthwise-separable block
    BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
              (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]

    def __init__(self, width: float = 0.25, classes: int = 2) -> None:
        super().__init__()
        cin = int(32 * width)
        layers = [conv_bn(3, cin, 3, 2)]
        for cout_full, stride in self.BLOCKS:
            cout = int(cout_full * width)
            layers += [conv_bn(cin, cin, 3, stride, groups=cin), conv_bn(cin, cout, 1, 1)]
            cin = cout
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


model = MobileNetV1()
randomize_batch_norm(model)
model.eval()
example_inputs = (torch.rand(1, 3, 96, 96),)
calibration = [(torch.rand(1, 3, 96, 96),) for _ in range(8)]
test_inputs = [(torch.rand(1, 3, 96, 96),) for _ in range(2)]
