"""An LSTM sequence-to-sequence model: a two-layer encoder whose final states (h_n, c_n) start a two-layer decoder
over the target sequence, each decoder step classified."""
import torch
from torch import nn

torch.manual_seed(0)


class Seq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.decoder = nn.LSTM(6, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, source, target):
        _, (h, c) = self.encoder(source)
        seq, _ = self.decoder(target, (h, c))
        return self.head(seq)


model = Seq2Seq().eval()
example_inputs = (torch.randn(1, 10, 8), torch.randn(1, 5, 6))
calibration = [(torch.randn(1, 10, 8), torch.randn(1, 5, 6)) for _ in range(16)]
test_inputs = [(torch.randn(1, 10, 8), torch.randn(1, 5, 6)) for _ in range(3)]
