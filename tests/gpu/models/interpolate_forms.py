import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.interpolate's modes as decoders write them, at sizes that are multiples of nothing:
    bilinear by a scale factor (a VAE decoder's upsampling) and to a size with align_corners,
    nearest and nearest-exact to sizes that are not multiples of the input's, linear in 1-D,
    trilinear and nearest in 3-D, and bicubic; each followed by a little arithmetic."""

    def forward(self, x, v, s):
        return (F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False) * 2.0,
                F.interpolate(x, size=(17, 10), mode="bilinear", align_corners=True),
                F.interpolate(x, size=(11, 16), mode="nearest") + 1.0,
                F.interpolate(x, size=(9, 23), mode="nearest-exact"),
                F.interpolate(s, scale_factor=3, mode="linear", align_corners=False).relu(),
                F.interpolate(v, scale_factor=2, mode="trilinear", align_corners=False),
                F.interpolate(v, size=(4, 9, 7), mode="nearest") - 0.5,
                F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False))


def get_inputs():
    return [torch.randn(2, 3, 7, 11), torch.randn(2, 3, 3, 5, 6), torch.randn(3, 5, 13)]


def get_init_inputs():
    return []
