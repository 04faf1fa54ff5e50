import torch
import torch.nn as nn


class Model(nn.Module):
    """Plain products A @ B of half tensors, B contiguous along n: the TMA GEMM reads B MN-major
    (transposed 16-bit wgmma B tiles; the fp32 template competes with converting loads). A
    bfloat16 matmul (K = 72: a whole k-tile and a partial one, N = 136: a partial 64-column
    block), a float16 bmm, a 4-D float16 tensor times a matrix (flattened to rows), a matrix
    times a batch of matrices (A's batch broadcast), and a long K over a single tile (K = 4096:
    the split tail), at sizes that are multiples of no tile."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter((torch.randn(4096, 40) * 0.05).to(torch.bfloat16))

    def forward(self, a, b, p, q, x, v, c, y):
        return a @ b, torch.bmm(p, q), x @ v, c @ self.w, a @ y


def get_inputs():
    return [torch.randn(131, 72).to(torch.bfloat16), torch.randn(72, 136).to(torch.bfloat16),
            torch.randn(3, 45, 40).half(), torch.randn(3, 40, 72).half(),
            torch.randn(2, 3, 37, 64).half(), torch.randn(64, 88).half(),
            torch.randn(70, 4096).to(torch.bfloat16), torch.randn(2, 72, 64).to(torch.bfloat16)]


def get_init_inputs():
    return []
