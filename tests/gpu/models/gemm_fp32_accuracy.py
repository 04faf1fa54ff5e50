import torch
import torch.nn as nn


class Model(nn.Module):
    """K-major products long enough along K that TF32 misses float32's accuracy by far, searched
    under --precision fp32 at atol = rtol = 1e-4 (the .args file beside this one), where every
    candidate must pass: a 3xTF32 kernel that loses its remainders, sums its products in the
    tensor cores alone over the whole K (about 8e-5 of the outputs' size at K = 3000), or runs
    on tensor cores that round a TF32 operand's low bits instead of dropping them (the split
    relies on that) fails the GPU suite, where at the default 1e-2 it would pass as TF32 does. A
    Linear + ReLU with an odd N, and a batched x @ y^T. Partial sums stay about as large as the
    outputs (scaled inputs): where sums of 45 build outputs of 0.1, float32 summed in one order
    differs from float32 summed in another by more than 1e-4 (docs/PERF.md, eighteenth session)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3000, 301)

    def forward(self, x, a, b):
        return torch.relu(self.fc(x)), torch.bmm(a, b.transpose(1, 2))


def get_inputs():
    return [torch.randn(700, 3000), torch.randn(3, 400, 2048) * 0.15, torch.randn(3, 264, 2048) * 0.15]


def get_init_inputs():
    return []
