"""A convolutional autoencoder: strided Conv2d down (28 -> 14 -> 7) and ConvTranspose2d up
(7 -> 14 -> 28), ReLU between and a sigmoid on the reconstruction. 1x1x28x28 input, seeded random
weights."""

import torch
from torch import nn

torch.manual_seed(0)


class ConvAutoencoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


model = ConvAutoencoder().eval()
example_inputs = (torch.rand(1, 1, 28, 28),)
calibration = [(torch.rand(1, 1, 28, 28),) for _ in range(16)]
test_inputs = [(torch.rand(1, 1, 28, 28),) for _ in range(3)]
