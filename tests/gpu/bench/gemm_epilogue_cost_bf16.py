import torch
import torch.nn as nn


class Model(nn.Module):
    """gemm_epilogue_cost.py in bfloat16, with a product that has no epilogue at all: four
    bfloat16 Linear layers of gemm_bias_gelu_scale's shape (8192 x 4096 x 4096), each its own GEMM
    group read by the TMA GEMM's k16 path: no bias, the bias alone, GELU and a scale, ReLU and a
    residual. What the searches time per config says whether the half k-loop or the epilogue
    keeps bf16 products at half the 16-bit peak (docs/PERF.md, eleventh session; tests/gpu/run.sh,
    stage "searches")."""

    def __init__(self):
        super().__init__()
        self.bare = nn.Linear(4096, 4096, bias=False).to(torch.bfloat16)
        self.plain = nn.Linear(4096, 4096).to(torch.bfloat16)
        self.gelu = nn.Linear(4096, 4096).to(torch.bfloat16)
        self.residual = nn.Linear(4096, 4096).to(torch.bfloat16)

    def forward(self, x, r):
        return (self.bare(x), self.plain(x), torch.nn.functional.gelu(self.gelu(x)) * 0.5,
                torch.relu(self.residual(x)) + r)


def get_inputs():
    return [torch.rand(8192, 4096).to(torch.bfloat16), torch.randn(8192, 4096).to(torch.bfloat16)]


def get_init_inputs():
    return []
