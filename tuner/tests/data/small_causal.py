import torch
import torch.nn as nn


class Model(nn.Module):
    """A causal mask made from factories alone, applied to given scores before their softmax: the
    mask is written first (the softmax's row kernel loads it), by a group with no input tensor."""

    def forward(self, scores):
        n = scores.shape[-1]
        mask = torch.triu(torch.ones(n, n, device=scores.device), diagonal=1).bool()
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


def get_inputs():
    return [torch.randn(2, 3, 40, 40)]


def get_init_inputs():
    return []
