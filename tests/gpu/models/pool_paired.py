import torch
import torch.nn as nn


class Model(nn.Module):
    """Pooling that reads its windows' rows in aligned pairs (an even stride over even row
    strides): max 3 x 3 / 2, padding 1 (a row's first tap alone, then a pair), with NaNs; the same
    over a view one column in (its rows misaligned: the unpaired path); max 2 x 2 / 2 (one pair)
    with a chain after it; average 3 x 5 / (2, 4), padding (1, 2), ceil_mode, padding not counted
    (two pairs and a tap); average 1-D 3 / 2, padding 1, over an even length."""

    def __init__(self):
        super().__init__()
        self.max3 = nn.MaxPool2d(3, stride=2, padding=1)
        self.max2 = nn.MaxPool2d(2, stride=2)
        self.avg = nn.AvgPool2d((3, 5), stride=(2, 4), padding=(1, 2), ceil_mode=True, count_include_pad=False)
        self.avg1 = nn.AvgPool1d(3, stride=2, padding=1)

    def forward(self, x):
        return (self.max3(x), self.max3(x[:, :, :, 1:25]), torch.relu(self.max2(x)) + 1.0, self.avg(x),
                self.avg1(x.flatten(2)))


def get_inputs():
    x = torch.randn(2, 3, 18, 26)
    x[1, 2, 5, 8] = float("nan")
    return [x]


def get_init_inputs():
    return []
