"""A multilayer perceptron whose first hidden tensor has one unit 60 times as large as the others (the kind
of outlier channel that sets an int8 tensor's scale and leaves its other channels a few codes): the model
``--quantize mixed`` widens to int16 activations where that tensor sits, so that its wide layers can narrow.

    .venv/bin/mcu build bench/models/outlier_mlp.py --board mps2-an505 --quantize mixed --accuracy-budget 0
"""

import torch
from torch import nn

torch.manual_seed(0)

OUTLIER = 60.0


class OutlierMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 256)
        self.fc3, self.fc4, self.fc5 = nn.Linear(256, 256), nn.Linear(256, 256), nn.Linear(256, 10)
        with torch.no_grad():  # unit 0 of the first hidden tensor is large; fc2 reads it back at the others' size
            self.fc1.weight[0] *= OUTLIER
            self.fc1.bias[0] = abs(float(self.fc1.bias[0])) * OUTLIER
            self.fc2.weight[:, 0] /= OUTLIER

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        h = torch.relu(self.fc3(h))
        h = torch.relu(self.fc4(h))
        return self.fc5(h)


model = OutlierMLP().eval()
example_inputs = (torch.randn(1, 32),)
calibration = [(torch.randn(1, 32),) for _ in range(16)]
test_inputs = [(torch.randn(1, 32),) for _ in range(3)]
