"""LSTM run from an initial state passed in forward (h0, c0 inputs of the model)."""
import torch
from torch import nn

torch.manual_seed(0)


class LstmFromState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(10, 24, batch_first=True)
        self.head = nn.Linear(24, 6)

    def forward(self, x, h0, c0):
        seq, _ = self.lstm(x, (h0, c0))
        return self.head(seq[:, -1])


model = LstmFromState().eval()
g = torch.Generator().manual_seed(1)


def _sample():
    return (torch.randn(1, 20, 10, generator=g), 0.5 * torch.randn(1, 1, 24, generator=g).tanh(),
            torch.randn(1, 1, 24, generator=g))


example_inputs = _sample()
calibration = [_sample() for _ in range(16)]
test_inputs = [_sample() for _ in range(3)]
