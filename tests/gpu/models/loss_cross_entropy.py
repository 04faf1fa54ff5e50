import torch
import torch.nn as nn


class Model(nn.Module):
    """Cross-entropy at odd sizes with ignored targets: the mean over the counted rows, the sum,
    and per row (reduction none) with another ignore_index."""

    def forward(self, logits, target, other, other_target):
        f = torch.nn.functional
        return (f.cross_entropy(logits, target), f.cross_entropy(logits * 0.5, target, reduction="sum"),
                f.cross_entropy(other, other_target, reduction="none", ignore_index=3))


def get_inputs():
    target, other_target = torch.randint(0, 37, (67,)), torch.randint(0, 37, (67,))
    target[5] = target[40] = -100
    other_target[7] = other_target[8] = 3
    return [torch.randn(67, 37) * 3.0, target, torch.randn(67, 37), other_target]


def get_init_inputs():
    return []
