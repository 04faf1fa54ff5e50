import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's LSTMs set their initial states as `self.h0 = self.h0.to(x.device)` (the
    state it holds: no update) and `self.c0 = self.h0.to(x.device)` (another state as it is: a
    copy, which a kernel of its own writes for its binding to store)."""

    def __init__(self, n):
        super().__init__()
        self.h0 = torch.randn(3, n)
        self.c0 = torch.randn(3, n)
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.h0.to(x.device)
        return self.fc(x + self.c0)


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return [5]
