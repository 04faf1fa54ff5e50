import torch
import torch.nn as nn


class Model(nn.Module):
    """Root mean square over the last dimension (contiguous, not a multiple of any vector width),
    with the epilogue fused after the reduction."""

    def forward(self, x):
        return torch.sqrt(torch.mean(x * x, dim=-1) + 1e-3)


def get_inputs():
    return [torch.randn(129, 257)]


def get_init_inputs():
    return []
