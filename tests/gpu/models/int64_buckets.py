import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """int64 arithmetic as models write it: T5's relative position buckets (abs, comparisons, a
    logarithm truncated with .long(), minimum against full_like, where) reading an embedding table,
    the causal form's -min(rel, 0) clamped, and differences of large int64 values (near 1e11,
    where a float32 round trip would lose the units), at odd sizes."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Embedding(32, 4)

    def forward(self, x):
        q, k = x.shape[-2], x.shape[-1]
        rel = torch.arange(k, device=x.device)[None, :] - torch.arange(q, device=x.device)[:, None]
        buckets = (rel > 0).long() * 16
        r = torch.abs(rel)
        large = 8 + (torch.log(r.float() / 8) / math.log(128 / 8) * 8).long()
        large = torch.min(large, torch.full_like(large, 15))
        buckets = buckets + torch.where(r < 8, r, large)
        causal = (-torch.min(rel, torch.zeros_like(rel))).clamp(max=31)
        big = rel * 1_000_000_007
        exact = torch.abs(big) - torch.abs(big - 1)  # +-1 in int64
        return (x + self.bias(buckets).permute(2, 0, 1),
                causal.float() + exact.float(),
                torch.maximum(rel, torch.zeros_like(rel)).clamp_min(3).float())


def get_inputs():
    return [torch.randn(2, 4, 37, 45)]


def get_init_inputs():
    return []
