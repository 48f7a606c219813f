"""A MobileNetV3-style downsampling block for `mcu profile`: a 3x3 stem to 32 channels at 32x32, a 5x5
stride-2 depthwise convolution (BatchNorm, ReLU), a squeeze-excite gate multiplied into its output
(x * gate, the gate 1x32x1x1), a 1x1 head and a classifier. The two ops it is for: the depthwise layer
(204,800 MACs) and the broadcast multiply (8,192 elements).

    mcu profile bench/se_downsample.py --board mps2-an505

Instructions per MAC of the depthwise layer and per element of the multiply, before -> after the 5x5
paths and the per-channel gate path (README, kernel paths): M33 (mps2-an505) 5.98 -> 3.23 and 16.3
(unchanged); M4 (mps2-an386) 5.92 -> 3.22 and 16.4 (unchanged); M55 (mps3-an547) 1.45 (unchanged) and
11.5 -> 4.3; M0+ (mps2-an385-m0plus) 28.34 -> 11.00 and 154.6 -> 45.1.
"""

import torch
from torch import nn

torch.manual_seed(0)


class SEDownsample(nn.Module):
    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1), nn.ReLU())
        self.dw = nn.Sequential(nn.Conv2d(c, c, 5, 2, 2, groups=c), nn.BatchNorm2d(c), nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 4, 1), nn.ReLU(),
                                nn.Conv2d(c // 4, c, 1), nn.Hardsigmoid())
        self.head = nn.Sequential(nn.Conv2d(c, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(self.stem(x))
        return self.head(y * self.se(y))


model = SEDownsample().eval()
example_inputs = (torch.randn(1, 3, 32, 32),)
calibration = [(torch.randn(1, 3, 32, 32),) for _ in range(16)]
test_inputs = [(torch.randn(1, 3, 32, 32),) for _ in range(2)]
