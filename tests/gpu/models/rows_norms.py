import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over an odd feature count, then GroupNorm, both with affine parameters (written
    out at capture as three-pass row groups)."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(7)
        self.gn = nn.GroupNorm(5, 10)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.rand_like(p) + 0.5)

    def forward(self, x):
        return self.gn(self.ln(x))


def get_inputs():
    return [torch.randn(6, 10, 9, 7) * 2.0 + 1.0]


def get_init_inputs():
    return []
