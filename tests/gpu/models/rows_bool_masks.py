import torch
import torch.nn as nn


class Model(nn.Module):
    """Bool masks read by row kernels, one byte per element: a masked cumsum (the product fused into
    the scan's loads) at a row length that is no multiple of a vector width, a cumsum masked after
    the scan, a masked softmax, a masked mean over a middle dimension, a row maximum kept by a
    per-row mask, and a scan scaled by an int64 tensor (read by an elementwise kernel after the
    row kernel, which loads no int64)."""

    def forward(self, x, mask, keep, n, y, ymask):
        masked = torch.cumsum(x * mask, dim=1)
        after = torch.cumsum(x, dim=1) * mask
        softmax = torch.softmax(x.masked_fill(mask, float("-inf")), dim=1)
        mean = (y * ymask).sum(dim=1) / ymask.float().sum(dim=1).clamp(min=1.0)
        kept = x.amax(dim=1) * keep
        scaled = torch.cumsum(x, dim=1) * n
        return masked, after, softmax, mean, kept, scaled


def get_inputs():
    x = torch.randn(7, 1001)
    mask = torch.rand(7, 1001) > 0.3  # every row keeps some elements for the softmax
    return [x, mask, torch.rand(7) > 0.5, torch.randint(0, 5, (7, 1001)), torch.randn(6, 33, 5),
            torch.rand(6, 33, 5) > 0.5]


def get_init_inputs():
    return []
