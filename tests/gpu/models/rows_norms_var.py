import torch
import torch.nn as nn


class Model(nn.Module):
    """Vector norms (L2, L1), var, std and prod over a middle dimension at odd sizes, written out
    at capture into reductions and elementwise ops."""

    def forward(self, x):
        l2 = torch.linalg.vector_norm(x, 2, dim=1)
        l1 = torch.norm(x, p=1, dim=1)
        spread = torch.var(x, dim=1) + torch.std(x, dim=1, correction=0)
        return l2 + l1 + spread + torch.prod(1.0 + 0.1 * x, dim=1)


def get_inputs():
    return [torch.randn(5, 33, 7)]


def get_init_inputs():
    return []
