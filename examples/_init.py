"""Shared set-up for the random-weight reference models (imported by the example model files)."""

from torch import nn


def randomize_batch_norm(module: nn.Module) -> None:
    """Give every batch norm non-trivial statistics, so that folding it is really exercised."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
