import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal attention: its mask is made from factories alone, a group with no input tensor."""

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    return [torch.randn(2, 3, 40, 16) for _ in range(3)]


def get_init_inputs():
    return []
