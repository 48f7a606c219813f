"""A small CNN trained here, in seconds, on scikit-learn's bundled 8x8 handwritten digits.

Unlike the random-weight reference models, this one measures accuracy: 80% of
the 1,797 images train it (fixed seed), the other 360 are held out as the
bundled test vectors (`test_inputs`, with `test_labels`) and the evaluation set of
`mcu eval` (`eval_data`).
"""

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

SEED = 0


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=0.2,
                                                        random_state=SEED, stratify=digits.target)
    return (torch.from_numpy(x_train), torch.from_numpy(y_train).long(),
            torch.from_numpy(x_test), torch.from_numpy(y_test).long())


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float = 3e-3) -> nn.Module:
    model.train()
    fit(model, x, y, epochs, lr)
    return model.eval()


def fit(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epochs: int, lr: float) -> None:
    """The training loop alone: quantization-aware training runs it on an exported graph, which has no
    .train()/.eval() of its own (mcu switches its modes)."""
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    # Tiny batches: one thread is ~100x faster here than a contended thread pool, and deterministic.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), 32):
                batch = order[start:start + 32]
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
                loss.backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(dim=1) == labels).float().mean())


torch.manual_seed(SEED)
x_train, y_train, x_test, y_test = load_data()
model = train(DigitsCNN(), x_train, y_train, epochs=10)
example_inputs = (x_test[:1],)
calibration = [(x_train[i:i + 1],) for i in range(0, 400, 4)]
test_inputs = [(x_test[i:i + 1],) for i in range(len(x_test))]
test_labels = y_test
# `mcu eval` measures top-1 accuracy (fp32, int8 reference, simulated device) on these held-out images.
eval_data = [(x_test[i:i + 1], int(y_test[i])) for i in range(len(x_test))]


def qat_train(prepared: nn.Module) -> None:
    """`--qat`: fine-tune the fake-quantized model (int8, or 4-bit weights with --quantize w4a8) two epochs
    at a tenth of the learning rate."""
    fit(prepared, x_train, y_train, epochs=2, lr=3e-4)
