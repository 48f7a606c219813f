"""LSTM keyword spotter: 49 frames x 10 MFCC coefficients (batch_first), a two-layer LSTM,
the last step's hidden state through a linear layer to 12 classes. Seeded random weights. In int8 models
each layer is one mcu_lstm_s8 call (TFLite Micro's integer LSTM: int16 gates and cell, int8 hidden)."""

import torch
from torch import nn

torch.manual_seed(0)


class KwsLSTM(nn.Module):
    def __init__(self, features: int = 10, hidden: int = 32, classes: int = 12) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.lstm(x)
        return self.classifier(seq[:, -1])


model = KwsLSTM().eval()
example_inputs = (torch.randn(1, 49, 10),)
calibration = [(torch.randn(1, 49, 10),) for _ in range(16)]
test_inputs = [(torch.randn(1, 49, 10),) for _ in range(3)]
class_names = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "silence", "unknown"]
