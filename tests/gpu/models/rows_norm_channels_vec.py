import torch
import torch.nn as nn


class Model(nn.Module):
    """Norms over channels (a middle dimension) whose neighbouring rows are neighbours in memory
    (h * w a multiple of 4, so a thread may move four rows as vectors): an RMS norm with a
    per-channel weight centred by its own channel mean (two passes, an output per element), and
    the channels' argmax (an int64 per row)."""

    def __init__(self, channels):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(channels) + 0.5)

    def forward(self, x):
        y = x * torch.rsqrt(torch.mean(x * x, dim=1, keepdim=True) + 1e-5) * self.weight.view(1, -1, 1, 1)
        return y - y.mean(dim=1, keepdim=True), torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(3, 37, 2, 12)]


def get_init_inputs():
    return [37]
