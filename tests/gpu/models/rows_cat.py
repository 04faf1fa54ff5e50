import torch
import torch.nn as nn


class Model(nn.Module):
    """Row ops over a torch.cat along their rows, read part by part without writing the cat:
    KernelBench's exclusive cumsum (zeros before each row, then its last row dropped, as it writes
    it, or its last column), a cumprod after a column of ones, softmaxes over two tensors joined
    along the rows (misaligned parts; aligned ones, moved as vectors), a sum over a middle
    dimension that two tensors share with the ReLU of the cat after it (the cat then written by
    the row kernel), a logsumexp over three parts; the exclusive cumsum written with F.pad, a
    mean over rows padded with ones; rolls (cats of slices) along the rows, along two dimensions
    and flattened; at sizes that are multiples of nothing but the aligned parts."""

    def forward(self, x, y, p, q, a, b):
        zeros = torch.zeros_like(x.select(1, 0).unsqueeze(1))
        kernelbench = torch.cumsum(torch.cat((zeros, x), dim=1)[:-1], dim=1)
        exclusive = torch.cumsum(torch.cat((zeros, x), dim=1)[:, :-1], dim=1)
        ones = torch.ones_like(y[:, :1])
        products = torch.cumprod(torch.cat((ones, y * 0.5 + 0.75), dim=1), dim=1)
        softmax = torch.softmax(torch.cat((x, y), dim=1), dim=1)
        aligned = torch.softmax(torch.cat((a, b), dim=1), dim=1)  # parts that move as vectors
        joined = torch.cat((p, q), dim=1)
        total = joined.sum(dim=1)
        activated = torch.relu(joined)
        lse = torch.logsumexp(torch.cat((y, x, y), dim=-1), dim=-1)
        padded = torch.cumsum(torch.nn.functional.pad(x, (1, 0))[:, :-1], dim=1)
        mean = torch.nn.functional.pad(y, (2, 3), value=1.0).mean(dim=1)
        rolled = torch.cumsum(torch.roll(x, 5, 1), dim=1) + torch.roll(x, (2, -3), (0, 1)) + torch.roll(x, 11)
        return kernelbench, exclusive, products, softmax, aligned, total, activated, lse, padded, mean, rolled


def get_inputs():
    return [torch.randn(7, 301), torch.rand(7, 13), torch.randn(3, 5, 37), torch.randn(3, 6, 37), torch.randn(5, 64),
            torch.randn(5, 132)]


def get_init_inputs():
    return []
