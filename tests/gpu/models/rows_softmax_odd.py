import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax over rows whose length is not a multiple of any vector width (the scalar path),
    with the online sum of exp(x - max)."""

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(37, 1003) * 3.0]


def get_init_inputs():
    return []
