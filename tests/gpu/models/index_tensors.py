import torch
import torch.nn as nn


class Model(nn.Module):
    """Indexing by several int64 tensors, as models write it: each sequence's last token picked
    by a batch arange and an input of lengths (a reward model's head), two adjacent dimensions
    picked by broadcast index tensors with negative entries, two dimensions apart (the indexed
    ones go first in the result), and one element of two dimensions; at odd sizes."""

    def forward(self, h, lengths, x):
        last = h[torch.arange(h.shape[0], device=h.device), lengths - 1] * 2.0
        rows = torch.tensor([[0], [-1], [3]], device=x.device)
        cols = torch.tensor([2, -3, 0, 5], device=x.device)
        adjacent = x[:, rows, cols] + 1.0
        apart = x[rows, :, cols].relu()
        one = x[:, 2, -1] - 0.5
        return last, adjacent, apart, one


def get_inputs():
    return [torch.randn(5, 19, 33), torch.randint(1, 20, (5,)), torch.randn(7, 6, 9, 3)]


def get_init_inputs():
    return []
