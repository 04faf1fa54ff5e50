import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 2's Matmul_Sum_Max_AvgPool_LogSumExp form at its small sizes: after the
    row sum every reduction is over a size-1 dimension, which fusetune plans as a reshape (the
    chain fused after the sum, no kernel each)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        x = torch.mean(x, dim=1, keepdim=True)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return torch.logsumexp(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return [1024, 512]
