import torch
import torch.nn as nn


class Model(nn.Module):
    """Masks and weights built from torch.arange, as models write them: triu of a matrix product
    (the mask computed in the product's epilogue), tril below the diagonal of an elementwise
    value, a diagonal matrix times a matrix (diag_embed's, built from aranges; torch.diag's is a
    row scaling from capture on), a row sum weighted by a reversed slice of an arange
    (a value computed from an arange, read by a reduction) and a gather of each row reversed (an
    arange counting down as the index), at sizes that are multiples of nothing."""

    def forward(self, a, b, x, d, m):
        upper = torch.triu(torch.matmul(a, b))
        lower = torch.tril(torch.sigmoid(x), diagonal=-1)
        scaled = torch.diag_embed(d) @ m
        rows = torch.diag(d) @ m
        weighted = (x * torch.arange(x.shape[1] + 3, device=x.device, dtype=x.dtype)[3:].flip(0)).sum(dim=1)
        down = torch.arange(x.shape[1] - 1, -1, -1, device=x.device)
        reversed_rows = torch.gather(x, 1, down.expand(x.shape[0], -1))
        return upper, lower, scaled, rows, weighted, reversed_rows


def get_inputs():
    return [torch.randn(37, 50), torch.randn(50, 45), torch.randn(33, 47), torch.randn(29), torch.randn(29, 31)]


def get_init_inputs():
    return []
