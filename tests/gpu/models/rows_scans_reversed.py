import torch
import torch.nn as nn


class Model(nn.Module):
    """Reversed and exclusive scans as models write them: cumsum from the end of each row (flip,
    cumsum, flip) at a row length that is not a multiple of any vector width, an exclusive
    cumsum (the inclusive one minus the element), and a flipped input summed over its rows
    with a per-column weight (a reduction reading a reversed run)."""

    def __init__(self, cols):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(cols) + 0.5)

    def forward(self, x, y):
        reverse = torch.flip(torch.cumsum(torch.flip(x, dims=[1]), dim=1), dims=[1])
        exclusive = torch.cumsum(y, dim=-1) - y
        total = (torch.flip(y, dims=[0, 1]) * self.weight).sum(dim=1)
        return reverse, exclusive, total


def get_inputs():
    return [torch.randn(7, 1001), torch.randn(9, 37)]


def get_init_inputs():
    return [37]
