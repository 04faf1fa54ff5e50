import torch
import torch.nn as nn


class Model(nn.Module):
    """Reductions over size-1 dimensions, which fusetune plans as reshapes: a max, a mean and a
    logsumexp (its infinity guard included) of a row sum kept as (rows, 1), fused after the sum;
    and an argmax over the size-1 dimension, still a reduction (all zeros)."""

    def forward(self, x):
        s = x.sum(dim=1, keepdim=True)
        chain = torch.logsumexp(s.amax(dim=1, keepdim=True).mean(dim=1, keepdim=True), dim=1)
        return chain, torch.argmax(s, dim=1)


def get_inputs():
    return [torch.randn(37, 1001)]


def get_init_inputs():
    return []
