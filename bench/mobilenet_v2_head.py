"""The first four blocks of MobileNetV2 (width 1.0, 224x224x3 input, as torchvision builds it), random
weights: the layers whose per-op cycles on a Cortex-M55 with CMSIS-NN are published for an Alif E8
(pytorch/executorch issue #17651), measured by bench/cycles.py --mv2-head.

The blocks follow the MobileNetV2 paper (Sandler et al., 2018, table 2): a 3x3 stride-2 convolution to
32 channels, then inverted residual blocks (1x1 expansion by t, 3x3 depthwise, linear 1x1 projection)
with (t, channels, stride) = (1, 16, 1), (6, 24, 2), (6, 24, 1), the last with its residual add.
"""

import torch
from torch import nn

torch.manual_seed(0)


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, relu6: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    return layers + [nn.ReLU6()] if relu6 else layers


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = conv_bn(cin, hidden, 1) if expand != 1 else []
        layers += conv_bn(hidden, hidden, 3, stride, groups=hidden)
        layers += conv_bn(hidden, cout, 1, relu6=False)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Sequential(*conv_bn(3, 32, 3, 2)), InvertedResidual(32, 16, 1, 1),
                                      InvertedResidual(16, 24, 2, 6), InvertedResidual(24, 24, 1, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


model = MobileNetV2Head()
for m in model.modules():
    if isinstance(m, nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5)
        m.running_var.uniform_(0.5, 2.0)
        m.weight.data.uniform_(0.5, 1.5)
        m.bias.data.uniform_(-0.2, 0.2)
model.eval()
example_inputs = (torch.rand(1, 3, 224, 224),)
calibration = [(torch.rand(1, 3, 224, 224),) for _ in range(4)]
test_inputs = [(torch.rand(1, 3, 224, 224),)]
