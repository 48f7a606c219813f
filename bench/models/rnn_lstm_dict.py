"""An LSTM model returning a dict of outputs: the logits and h_n."""
import torch
from torch import nn

torch.manual_seed(0)


class LstmDict(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        seq, (h, c) = self.lstm(x)
        return {"logits": self.head(seq[:, -1]), "h": h}


model = LstmDict().eval()
example_inputs = (torch.randn(1, 12, 8),)
calibration = [(torch.randn(1, 12, 8),) for _ in range(16)]
test_inputs = [(torch.randn(1, 12, 8),) for _ in range(3)]
