import torch
import torch.nn as nn


class Model(nn.Module):
    """Reads by index, as models write them: a relative position bias table indexed by a flattened
    int64 buffer (Swin), an embedding, index_select along the last dimension, and a middle
    dimension picked by a constant 2-D index with negative entries, rows picked by shifted
    indices wrapped around (int64 arange and fmod), torch.roll (cats of slices), each followed by
    a little arithmetic, at sizes that are multiples of nothing; and a mean restrided by
    as_strided (adaptive_avg_pool1d's decomposition)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(169, 5))
        self.register_buffer("pos", torch.randint(0, 169, (49, 49)))
        self.emb = nn.Embedding(1003, 37)

    def forward(self, x, tokens, cols):
        bias = self.table[self.pos.view(-1)].view(49, 49, -1).permute(2, 0, 1) * 2.0
        words = self.emb(tokens) + 1.0
        picked = torch.index_select(x, -1, cols).relu()
        rows = x[:, torch.tensor([[0, -1], [4, -7]])] - 0.5
        pooled = nn.functional.adaptive_avg_pool1d(x, 1).squeeze(-1)
        rolled = torch.roll(x, shifts=(-3, 2), dims=(1, 2)) * 3.0
        wrapped = x[:, torch.fmod(torch.arange(9, device=x.device) + 4, 9)] + 2.0
        return bias, words, picked, rows, pooled, rolled, wrapped


def get_inputs():
    return [torch.randn(13, 9, 41), torch.randint(0, 1003, (7, 33)), torch.randint(0, 41, (17,))]


def get_init_inputs():
    return []
