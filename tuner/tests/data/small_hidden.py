import torch
import torch.nn as nn


class Cell(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.h = torch.zeros(2, n)
        self.steps = torch.zeros(1)
        self.register_buffer("total", torch.zeros(2, n), persistent=False)

    def forward(self, x):
        self.h = self.h * 0.5 + x  # a plain attribute reassigned
        self.total = self.total + self.h  # a submodule's buffer reassigned
        self.steps.add_(1.0)  # a plain attribute changed in place
        return self.h * self.steps


class Model(nn.Module):
    """A recurrent step that keeps its state in tensor attributes (KernelBench's VanillaRNN keeps
    its hidden state as a plain attribute): forward updates them, so each call starts where the
    last one stopped. A plain attribute forward only reads stays a constant."""

    def __init__(self, n):
        super().__init__()
        self.hidden = torch.randn(2, n)
        self.scale = torch.full((n,), 3.0)
        self.cell = Cell(n)
        self.fc = nn.Linear(2 * n, n)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.fc(torch.cat((x, self.hidden), dim=1)))
        return self.cell(self.hidden) * self.scale + self.cell.total


def get_inputs():
    return [torch.randn(2, 5)]


def get_init_inputs():
    return [5]
