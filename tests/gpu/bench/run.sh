#!/usr/bin/env bash
# Microbenchmarks behind design decisions (docs/PERF.md cites their output): the copy roofline,
# what cuBLASLt offers for the shared GEMM shapes, whether cuDNN fuses a convolution's epilogue
# on fp32 data, how the loop shapes of max pooling and of rmsnorm_channels' channel norm set
# their memory traffic, how fast the channels-last transposes around a convolution run, and
# whether chunks of a convolution on two streams hide those transposes, and where the 3xTF32 TMA
# GEMM's time goes. Run on the GPU machine, the default set or those named:
#   bash tests/gpu/bench/run.sh [copy] [cublaslt] [cudnn_fusion] [pool] [pool_ncu] [rmsnorm] [rmsnorm_ncu] [transpose]
#                               [conv_overlap] [tf32x3] [tf32x3_ncu]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${TMPDIR:-/tmp}/fusetune_bench
mkdir -p "$BIN"
for bench in ${@:-copy cublaslt cudnn_fusion pool rmsnorm transpose}; do
  case $bench in
    copy)
      nvcc -O3 -arch=sm_90 -o "$BIN/copy_ceiling" "$HERE/copy_ceiling.cu"
      "$BIN/copy_ceiling" ;;
    cublaslt)
      nvcc -O2 -o "$BIN/cublaslt_probe" "$HERE/cublaslt_probe.cpp" -lcublasLt
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
      ;;
    cudnn_fusion)  # against the cuDNN that PyTorch loads (its nvidia-cudnn wheel), else the toolkit's
      cudnn=$(python3 -c "import nvidia.cudnn; print(nvidia.cudnn.__path__[0])" 2>/dev/null || true)
      if [ -n "$cudnn" ]; then flags=(-I"$cudnn/include" -L"$cudnn/lib" -Xlinker -rpath="$cudnn/lib" -l:libcudnn.so.9)
      else flags=(-lcudnn); fi
      nvcc -O2 -std=c++17 -arch=sm_90 -o "$BIN/cudnn_fusion_probe" "$HERE/cudnn_fusion_probe.cu" "${flags[@]}"
      "$BIN/cudnn_fusion_probe" ;;
    pool|pool_ncu|rmsnorm|rmsnorm_ncu)  # *_ncu: one run of each loop shape under Nsight Compute, with its breakdowns
      probe=${bench%_ncu}_probe
      kernels=$([ ${bench%_ncu} = pool ] && echo 'taps|rows' || echo 'copy4|tile|regs|reread')
      nvcc -O3 -arch=sm_90 -std=c++17 -o "$BIN/$probe" "$HERE/$probe.cu"
      if [ $bench = ${bench%_ncu} ]; then "$BIN/$probe"
      else ncu --clock-control none -k regex:"$kernels" --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --print-details all "$BIN/$probe" 1 | grep -v "^==PROF=="; fi ;;
    transpose)  # exits non-zero if a variant's output differs from the extension's kernel's
      nvcc -O3 -arch=sm_90 -std=c++17 -I "$HERE/../../../templates" -o "$BIN/transpose_probe" "$HERE/transpose_probe.cu"
      "$BIN/transpose_probe" ;;
    tf32x3|tf32x3_ncu)  # the 3xTF32 TMA GEMM against TF32; *_ncu: one run of each under Nsight Compute
      nvcc -O3 -std=c++17 -arch=sm_90a -I "$HERE/../../../templates" -o "$BIN/gemm_3xtf32_probe" "$HERE/gemm_3xtf32_probe.cu"
      if [ $bench = tf32x3 ]; then "$BIN/gemm_3xtf32_probe"
      else ncu --clock-control none -k regex:gemm_tma --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section ComputeWorkloadAnalysis "$BIN/gemm_3xtf32_probe" 1 | grep -v "^==PROF=="; fi ;;
    conv_overlap)  # PyTorch only: chunked channels-last convolutions on two streams against serial
      python3 "$HERE/conv_overlap_probe.py" ;;
    *) echo "unknown benchmark $bench (copy, cublaslt, cudnn_fusion, pool, pool_ncu, rmsnorm, rmsnorm_ncu, transpose, conv_overlap, tf32x3, tf32x3_ncu)"; exit 2 ;;
  esac
done
