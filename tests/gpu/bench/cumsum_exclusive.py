import torch
import torch.nn as nn


class Model(nn.Module):
    """An exclusive cumsum exactly as KernelBench writes it (a zero column before each row, the
    last row dropped, then the scan), at the reversed and masked cumsums' size: one row kernel
    reading x part by part instead of writing the cat first."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        exclusive_cumsum = torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), x), dim=self.dim)[:-1]
        return torch.cumsum(exclusive_cumsum, dim=self.dim)


rows, cols = 8192, 24576


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return [1]
