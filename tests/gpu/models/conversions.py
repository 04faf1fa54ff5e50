import torch
import torch.nn as nn


class Model(nn.Module):
    """Conversions to bool and int64 as models write them: a causal mask made of ones with triu and
    .bool() (a Llama decoder's) filling a score matrix before its softmax, a float truncated
    toward zero with .long() and taken back to float, and a true division of two int64 tensors
    (7 / 2 is 3.5, not 3), at odd sizes."""

    def forward(self, scores, x):
        n = scores.shape[-1]
        mask = torch.triu(torch.ones(n, n, device=scores.device), diagonal=1).bool()
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        steps = (x * 3.0).long()
        ratio = (steps * 7 + 100) / (steps.abs() + 2)
        return attn, steps.float() * 0.5 + x.bool().float() + ratio


def get_inputs():
    x = torch.randn(9, 131)
    x[0, :5] = 0.0  # some zeros for .bool()
    return [torch.randn(3, 37, 37), x]


def get_init_inputs():
    return []
