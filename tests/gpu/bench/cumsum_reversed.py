import torch
import torch.nn as nn


class Model(nn.Module):
    """A reversed cumsum as KernelBench writes it (flip, cumsum, flip), at cumsum_rows' row length
    and half its rows: one row kernel reading and writing through negative strides."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


rows, cols = 8192, 24576


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return [1]
