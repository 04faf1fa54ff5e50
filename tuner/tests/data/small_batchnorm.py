import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm in training mode at odd sizes, 2-D with a momentum of 0.3 and 1-D with the
    default: batch statistics, and the running statistics and counters, which are state the
    forward updates (stored by the bindings; the counter is int64 arithmetic)."""

    def __init__(self):
        super().__init__()
        self.bn2 = nn.BatchNorm2d(5, momentum=0.3)
        self.bn1 = nn.BatchNorm1d(7)
        with torch.no_grad():
            for bn in (self.bn2, self.bn1):
                bn.running_mean.uniform_(-1.0, 1.0)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
            self.bn1.num_batches_tracked.fill_(41)

    def forward(self, x, z):
        return torch.relu(self.bn2(x)), self.bn1(z) * 2.0


def get_inputs():
    return [torch.randn(3, 5, 9, 11) * 2.0 + 0.5, torch.randn(13, 7)]


def get_init_inputs():
    return []
