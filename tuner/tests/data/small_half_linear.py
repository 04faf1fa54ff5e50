import torch
import torch.nn as nn


class Model(nn.Module):
    """bfloat16 Linear layers: one followed by GELU (cuBLASLt's float32 product, then a pass that
    adds the bias and stores bfloat16), one by ReLU (cuBLASLt adds the bias, applies the ReLU and
    writes bfloat16 itself)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 24).to(torch.bfloat16)
        self.b = nn.Linear(24, 16).to(torch.bfloat16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.a(x))
        return torch.relu(self.b(h))


def get_inputs():
    return [torch.randn(8, 32, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
