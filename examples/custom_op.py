"""A model with the user's own op: ``squareplus``, a smooth ReLU that mcu does not have,
defined with ``torch.library`` and registered with its C kernels (custom_op/squareplus.c) and Python
references. 1x1x16x16 input, 10 classes, random weights."""

import numpy as np
import torch
from torch import nn

import mcu

torch.manual_seed(0)


@torch.library.custom_op("mcu_example::squareplus", mutates_args=())
def squareplus(x: torch.Tensor, b: float = 4.0) -> torch.Tensor:
    return (x + torch.sqrt(x * x + b)) * 0.5


@squareplus.register_fake
def _(x: torch.Tensor, b: float = 4.0) -> torch.Tensor:
    return torch.empty_like(x)


F32 = np.float32


def squareplus_reference(inputs, args):
    """fp32, in the C kernel's order of float32 operations."""
    x, b = inputs[0].astype(F32), F32(args[0])
    return ((x + np.sqrt(x * x + b)) * F32(0.5)).astype(F32)


def squareplus_reference_int8(inputs, args, quant):
    """int8: the C kernel's 256-entry table, applied to the codes."""
    codes = np.arange(-128, 128, dtype=np.int32)
    x = (codes - quant.input_zero_points[0]).astype(F32) * F32(quant.input_scales[0])
    v = squareplus_reference([x], args) * (F32(1.0) / F32(quant.output_scale))
    r = np.where(v >= 0, (v + F32(0.5)).astype(np.int32), -((F32(0.5) - v).astype(np.int32)))
    table = np.clip(r + quant.output_zero_point, -128, 127).astype(np.int8)
    return table[inputs[0].astype(np.int32) + 128]


custom_ops = [
    mcu.custom_op(
        "mcu_example::squareplus",
        fp32=("squareplus_f32", "custom_op/squareplus.c"),
        int8=("squareplus_s8", "custom_op/squareplus.c"),
        reference=squareplus_reference,
        reference_int8=squareplus_reference_int8,
        int8_output="observe",   # its output scale comes from calibration, like any activation
        scratch_bytes=256,       # the int8 kernel's table
        elementwise=True,        # each element on its own: any memory layout will do
        in_place=True,           # and it may write over its input
    ),
]


class SquareplusNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = squareplus(self.conv1(x), 4.0)
        x = squareplus(self.conv2(x), 1.0)
        return self.fc(x.mean(dim=(2, 3)))


model = SquareplusNet().eval()
example_inputs = (torch.randn(1, 1, 16, 16),)
calibration = [(torch.randn(1, 1, 16, 16),) for _ in range(16)]
test_inputs = [(torch.randn(1, 1, 16, 16),) for _ in range(3)]
