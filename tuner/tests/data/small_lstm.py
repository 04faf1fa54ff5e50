import torch
import torch.nn as nn


class Model(nn.Module):
    """A two-layer LSTM read batch first, given no initial state: one recurrent group."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, 2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def get_inputs():
    return [torch.randn(3, 11, 7)]


def get_init_inputs():
    return [7, 13]
