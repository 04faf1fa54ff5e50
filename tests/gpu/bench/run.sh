#!/usr/bin/env bash
# Microbenchmarks behind design decisions (docs/PERF.md cites their output): the copy roofline
# and what cuBLASLt offers for the shared GEMM shapes. Run on the GPU machine:
#   bash tests/gpu/bench/run.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${TMPDIR:-/tmp}/fusetune_bench
mkdir -p "$BIN"
nvcc -O3 -arch=sm_90 -o "$BIN/copy_ceiling" "$HERE/copy_ceiling.cu"
nvcc -O2 -o "$BIN/cublaslt_probe" "$HERE/cublaslt_probe.cpp" -lcublasLt
"$BIN/copy_ceiling"
"$BIN/cublaslt_probe"
python3 - <<'PY'
# The cuBLASLt that PyTorch (and so the built extension) loads, and its version.
import ctypes, torch
torch.zeros(1, device="cuda")
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcublasLt" in l})
for path in libs:
    lib = ctypes.CDLL(path)
    lib.cublasLtGetVersion.restype = ctypes.c_size_t
    print("torch loads", path, "version", lib.cublasLtGetVersion())
PY
