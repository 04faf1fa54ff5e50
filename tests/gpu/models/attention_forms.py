import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """scaled_dot_product_attention in the forms the fused kernel runs, at sizes that are multiples
    of nothing: causal heads of 64 with a residual after them (the epilogue), fewer queries than
    keys under the causal mask with a scale of its own, more queries than keys without it, a 3-D
    input with heads of 128, heads of 16 read through the transpose of a [batch, seq, heads, D]
    view and merged back (the kernel stores them in that order), grouped heads (six of q's over
    two of k's and v's, repeated as Hugging Face's Llama does before the attention, and as Meta's
    does over [batch, seq, heads, D] before the transpose: read as they are); and an additive mask
    tensor, which capture writes out into products and a softmax."""

    def forward(self, q, k, v, q2, k2, v2, x3, qkv, q6, k6, v6, k7, v7, mask):
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0 + q
        short = F.scaled_dot_product_attention(q2, k2, v2, is_causal=True, scale=0.3)
        wide = F.scaled_dot_product_attention(k2, q2, q2)
        flat = F.scaled_dot_product_attention(x3, x3, x3)
        b, s, _ = qkv.shape
        hq, hk, hv = qkv.view(b, s, 3, 4, 16).unbind(2)
        heads = F.scaled_dot_product_attention(hq.transpose(1, 2), hk.transpose(1, 2), hv.transpose(1, 2), is_causal=True)
        heads = heads.transpose(1, 2)  # [batch, seq, heads, D] again: written in that order
        b, h, s, d = k6.shape
        repeated = [x[:, :, None].expand(b, h, 3, s, d).reshape(b, 3 * h, s, d) for x in (k6, v6)]
        llama = F.scaled_dot_product_attention(q6, *repeated, is_causal=True)
        seq_first = [x[:, :, :, None].expand(b, s, h, 3, d).reshape(b, s, 3 * h, d) for x in (k7, v7)]
        grouped = F.scaled_dot_product_attention(q6, *[x.transpose(1, 2) for x in seq_first])
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return causal, short, wide, flat, heads, llama, grouped, masked


def get_inputs():
    return [torch.randn(2, 3, 77, 64), torch.randn(2, 3, 77, 64), torch.randn(2, 3, 77, 64),
            torch.randn(2, 3, 50, 32), torch.randn(2, 3, 91, 32), torch.randn(2, 3, 91, 32),
            torch.randn(4, 45, 128), torch.randn(2, 70, 3 * 4 * 16),
            torch.randn(2, 6, 59, 32), torch.randn(2, 2, 59, 32), torch.randn(2, 2, 59, 32),
            torch.randn(2, 59, 2, 32), torch.randn(2, 59, 2, 32), torch.randn(77, 77)]


def get_init_inputs():
    return []
