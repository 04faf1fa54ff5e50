import torch
import torch.nn as nn


class Model(nn.Module):
    """Half-precision tensors, computed in float32 by fusetune: a float16 Linear (weights and
    input) with its ReLU, a softmax over the float16 result, a rounding to bfloat16 inside the
    model times a bfloat16 input, a bfloat16 row sum and a float32 result; odd sizes."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(67, 45).half()

    def forward(self, x, y):
        h = torch.relu(self.fc(x))
        s = torch.softmax(h, dim=-1)
        b = s.to(torch.bfloat16) * y
        return h, b, y.sum(-1), b.float().amax(0)


def get_inputs():
    return [torch.randn(37, 67).half(), torch.randn(37, 45).to(torch.bfloat16)]


def get_init_inputs():
    return []
