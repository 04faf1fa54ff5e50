import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Grouped-query causal self-attention as Llama writes it: 32 query heads of 64 over 8 key and
    value heads, each repeated for four query heads by repeat_kv before the attention, then the
    output projection."""

    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    @staticmethod
    def repeat_kv(x, n_rep):
        b, h, s, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        n_rep = self.heads // self.kv_heads
        y = F.scaled_dot_product_attention(q, self.repeat_kv(k, n_rep), self.repeat_kv(v, n_rep), is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, -1))


batch, seq, hidden, heads, kv_heads = 4, 1024, 2048, 32, 8


def get_inputs():
    return [torch.randn(batch, seq, hidden)]


def get_init_inputs():
    return [hidden, heads, kv_heads]
