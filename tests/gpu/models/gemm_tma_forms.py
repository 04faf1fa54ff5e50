import torch
import torch.nn as nn


class Model(nn.Module):
    """The forms the TMA GEMM reads (K-major operands, rows of whole 16 bytes) at irregular sizes:
    Linear + ReLU + residual with an odd N (element-by-element epilogue); a batched x @ y^T with
    more tiles than SMs (every block loops over several tiles, the ring wrapping across them) and
    a float4 epilogue; a Linear with K = 4 (one partial k-tile, zero-filled by TMA); split tails
    (templates/gemm_tma_split.h): a long-K Linear + residual with fewer tiles than SMs (each tile
    cut in up to 4 parts along K) and a batched product one round and a bit long (the last
    round's tiles cut in 2, at K = 1000, a partial k-tile in the second part)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(68, 45)
        self.fc2 = nn.Linear(4, 132)
        self.fc3 = nn.Linear(2000, 203)

    def forward(self, x, r, a, b, y, z, r2, c, d):
        p = torch.relu(self.fc(x)) + r
        q = torch.bmm(a, b.transpose(1, 2)) * 0.5
        s = self.fc2(y)
        t = torch.relu(self.fc3(z)) + r2
        u = torch.bmm(c, d.transpose(1, 2))
        return p, q, s, t, u


def get_inputs():
    return [torch.randn(131, 68), torch.randn(131, 45), torch.randn(8, 1000, 36), torch.randn(8, 600, 36),
            torch.randn(300, 4), torch.randn(300, 2000), torch.randn(300, 203), torch.randn(4, 1000, 1000) * 0.1,
            torch.randn(4, 600, 1000) * 0.1]


def get_init_inputs():
    return []
