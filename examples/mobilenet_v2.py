"""MobileNetV2 at width 0.35: inverted residual blocks (1x1 expansion by 6, 3x3 depthwise,
1x1 linear projection; residual where stride is 1 and channels match), ReLU6, batch norms folded.
1x3x96x96 input, 10 classes, seeded random weights."""

import torch
from torch import nn

from _init import randomize_batch_norm

torch.manual_seed(0)


def make_divisible(v: float, divisor: int = 8) -> int:
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1)] if expand != 1 else []
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, cout, 1, relu=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    # (expansion, channels, repeats, first stride), as in the paper
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]

    def __init__(self, width: float = 0.35, classes: int = 10) -> None:
        super().__init__()
        cin = make_divisible(32 * width)
        layers: list[nn.Module] = [conv_bn(3, cin, 3, stride=2)]
        for t, c, n, s in self.SETTINGS:
            cout = make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        last = 1280  # the paper keeps the last layer at 1280 for widths below 1
        layers.append(conv_bn(cin, last, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


model = MobileNetV2()
randomize_batch_norm(model)
model.eval()
example_inputs = (torch.randn(1, 3, 96, 96),)
calibration = [(torch.randn(1, 3, 96, 96),) for _ in range(16)]
test_inputs = [(torch.randn(1, 3, 96, 96),) for _ in range(3)]
