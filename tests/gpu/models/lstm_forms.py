import torch
import torch.nn as nn

# LSTMs as the recurrent family runs them (one persistent kernel each, the layers as a wavefront),
# at irregular sizes: batch 3, hidden sizes no units-per-block value divides, an input size unlike
# the hidden one. The first reads x batch first with its initial state from the inputs (as
# KernelBench's LSTMs do, from attributes); the second reads the first's output time first
# through its strides, one layer; the third has no initial state (torch.zeros, written by a small
# elementwise group first). Every output the three give is returned or read.
batch, steps, inputs, hidden, second = 3, 41, 37, 45, 29


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, second_size):
        super().__init__()
        self.first = nn.LSTM(input_size, hidden_size, 3, batch_first=True)
        self.second = nn.LSTM(hidden_size, second_size)
        self.stateless = nn.LSTM(second_size, 6)

    def forward(self, x, h0, c0, h1, c1):
        out, (h, c) = self.first(x, (h0, c0))
        y, (hn, cn) = self.second(out.transpose(0, 1), (h1, c1))
        z, _ = self.stateless(y[-5:])
        return torch.tanh(out) * 2, h, c + 1, y[-1], hn, cn, z


def get_inputs():
    return [torch.randn(batch, steps, inputs), torch.randn(3, batch, hidden), torch.randn(3, batch, hidden),
            torch.randn(1, batch, second), torch.randn(1, batch, second)]


def get_init_inputs():
    return [inputs, hidden, second]
