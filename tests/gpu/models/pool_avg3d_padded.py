import torch
import torch.nn as nn


class Model(nn.Module):
    """Average pooling in 3-D with padding and ceil_mode, padding not counted, plus a 2-D average
    pooling with a divisor override over the same data seen as 2-D."""

    def __init__(self):
        super().__init__()
        self.pool3 = nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.pool2 = nn.AvgPool2d((2, 3), stride=(1, 2), padding=(1, 1), divisor_override=5)

    def forward(self, x):
        return self.pool3(x).sum() + self.pool2(x[0])


def get_inputs():
    return [torch.randn(2, 3, 9, 10, 11)]


def get_init_inputs():
    return []
