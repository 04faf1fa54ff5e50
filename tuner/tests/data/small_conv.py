import torch
import torch.nn as nn


class Model(nn.Module):
    """Every convolution form on small irregular shapes, each its own group: 1-D strided and
    dilated with a bias; 2-D grouped with rectangular kernel, stride and padding, then a chain;
    3-D depthwise without bias (cuDNN writes the output); transposed 1-D with output_padding;
    transposed 2-D grouped and dilated with output_padding, then tanh; transposed 3-D bare."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(6, 10, 5, stride=2, padding=3, dilation=2)
        self.c2 = nn.Conv2d(12, 9, (3, 4), stride=(2, 1), padding=(1, 2), groups=3)
        self.c3 = nn.Conv3d(8, 8, 3, padding=1, groups=8, bias=False)
        self.t1 = nn.ConvTranspose1d(6, 4, 4, stride=3, padding=1, output_padding=2)
        self.t2 = nn.ConvTranspose2d(6, 9, 3, stride=2, padding=1, output_padding=1, groups=3, dilation=2)
        self.t3 = nn.ConvTranspose3d(4, 5, 2, stride=2, bias=False)

    def forward(self, a, b, c, d, e, f):
        return (self.c1(a), torch.relu(self.c2(b)) * 0.5, self.c3(c), self.t1(d), torch.tanh(self.t2(e)), self.t3(f))


def get_inputs():
    return [torch.randn(3, 6, 37), torch.randn(2, 12, 13, 11), torch.randn(2, 8, 5, 7, 9), torch.randn(3, 6, 19),
            torch.randn(2, 6, 7, 9), torch.randn(2, 4, 3, 5, 6)]


def get_init_inputs():
    return []
