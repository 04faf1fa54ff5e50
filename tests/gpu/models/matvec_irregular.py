import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix times a one-column matrix (N = 1), the matvec form that plans as a GEMM."""

    def forward(self, a, v):
        return torch.matmul(a, v)


def get_inputs():
    return [torch.rand(97, 301), torch.rand(301, 1)]


def get_init_inputs():
    return []
