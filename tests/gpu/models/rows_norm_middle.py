import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS norm over channels (a middle dimension) with a per-channel weight, then the result
    centred by its own channel mean: two passes over each row and an output per element."""

    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)

    def forward(self, x):
        y = x * torch.rsqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5) * self.weight.view(1, -1, 1, 1)
        return y - y.mean(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(3, 37, 5, 7)]


def get_init_inputs():
    return [37]
