import torch
import torch.nn as nn


class Model(nn.Module):
    """Bool masks the model is given, as models use them: a masked cumsum (KernelBench's), a where
    over a transposed mask, and a mask multiplied into a matrix product's result, at sizes that
    are multiples of nothing (the masks read one byte per element at odd offsets)."""

    def forward(self, x, mask, a, b, keep):
        masked = torch.cumsum(x * mask, dim=1)
        kept = torch.where(mask.t(), x.t(), -1.0)
        product = (a @ b) * keep
        return masked, kept, product


def get_inputs():
    return [torch.randn(7, 333), torch.rand(7, 333) > 0.5, torch.randn(37, 50), torch.randn(50, 45),
            torch.rand(37, 45) > 0.3]


def get_init_inputs():
    return []
