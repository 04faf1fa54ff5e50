# Two Linear layers whose GEMM groups (different epilogues, so different kernels) run gemm_tma in
# one and the same tile configuration: the GPU suite's "tma_twins" stage tunes it with search
# spaces derived from configs/ (one gemm_tma config, every other family left out) and verifies
# it, so that each kernel must get its own launch state (shared-memory opt-in) in the extension.
# Irregular M; K and N multiples of 4 (TMA's 16-byte strides).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(1000, 520)]


def get_init_inputs():
    return [520, 384, 264]
