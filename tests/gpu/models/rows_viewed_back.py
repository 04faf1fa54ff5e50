import torch
import torch.nn as nn


class Model(nn.Module):
    """Norms over groups of channels followed by the model's own ops on the channels (the
    groups viewed back): GroupNorm on (N, C) then swish times a per-channel weight, and GroupNorm
    on (N, C, H, W) then a per-channel scale and a residual, at sizes no vector width divides;
    the ops after the view stay in the norm's row kernel."""

    def __init__(self, features, channels):
        super().__init__()
        self.gn_features = nn.GroupNorm(4, features)
        self.gn_channels = nn.GroupNorm(3, channels)
        self.weight = nn.Parameter(torch.rand(features) + 0.5)
        self.scale = nn.Parameter(torch.rand(channels, 1, 1) + 0.5)

    def forward(self, x, y):
        a = self.gn_features(x)
        a = a * torch.sigmoid(a) * self.weight
        b = self.gn_channels(y) * self.scale + y
        return a, b


def get_inputs():
    return [torch.randn(5, 36), torch.randn(5, 12, 7, 9)]


def get_init_inputs():
    return [36, 12]
