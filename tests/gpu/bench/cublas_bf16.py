# cuBLAS bfloat16 at gemm_bias_gelu_scale's shape (8192 x 4096 x 4096), eager PyTorch: the
# product alone, with the bias, and with the bias, GELU and a scale (three kernels), for scale
# against gemm_tma's bf16 products (tests/gpu/bench/gemm_epilogue_cost_bf16.py). CUDA events over
# 50 calls after 10 warm-up ones, no L2 flush (the operands, 96 MB, pass through it anyway).
#   python3 tests/gpu/bench/cublas_bf16.py
import torch
import torch.nn.functional as F
x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
for name, f in [("linear", lambda: F.linear(x, w)), ("linear_bias", lambda: F.linear(x, w, b)),
                ("linear_bias_gelu_scale", lambda: F.gelu(F.linear(x, w, b)) * 0.5)]:
    for _ in range(10):
        f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(50):
        f()
    e.record()
    torch.cuda.synchronize()
    ms = s.elapsed_time(e) / 50
    print("eager bf16 %s %.4f ms %.0f TFLOP/s" % (name, ms, 2 * 8192 * 4096 * 4096 / ms / 1e9))
