import torch
import torch.nn as nn


class Model(nn.Module):
    """The forms the 3xTF32 TMA GEMM reads besides gemm_tma's K-major ones (its splitters transpose
    operands contiguous along m or n), at irregular sizes with rows of whole 16 bytes: a transposed
    A times a row-major B (both MN-major, M not a tile multiple, K with a partial k-tile) with a
    bias row and a ReLU; a plain A @ B (B MN-major, N = 52: a 32-column box half past the edge);
    a batched a^T @ b; and a long-K A^T @ B with fewer tiles than SMs (its tiles cut along K,
    templates/gemm_tma_split.h)."""

    def forward(self, a, b, bias, c, d, e, f, g, h):
        p = torch.relu(torch.matmul(a.t(), b) + bias)
        q = torch.matmul(c, d) * 2.0
        r = torch.bmm(e.transpose(1, 2), f)
        s = torch.matmul(g.t(), h)
        return p, q, r, s


def get_inputs():
    return [torch.rand(200, 132), torch.rand(200, 96), torch.rand(96), torch.rand(100, 200), torch.rand(200, 52),
            torch.rand(3, 40, 68), torch.rand(3, 40, 36), torch.rand(2000, 260), torch.rand(2000, 200)]


def get_init_inputs():
    return []
