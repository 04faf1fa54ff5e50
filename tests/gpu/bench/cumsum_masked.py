import torch
import torch.nn as nn


class Model(nn.Module):
    """A masked cumsum as KernelBench writes it (the product with a bool mask, then the scan), at
    cumsum_rows' row length and half its rows: one row kernel loading the mask as bytes."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=self.dim)


rows, cols = 8192, 24576


def get_inputs():
    return [torch.rand(rows, cols), torch.randint(0, 2, (rows, cols)).bool()]


def get_init_inputs():
    return [1]
