// Kernels around a convolution that cuDNN runs channels-last (NHWC; the LAYOUT parameter of the
// cuDNN families): the tensors PyTorch gives are channels-first (NCHW), so x and the weight are
// transposed before it, and the group's epilogue pass reads the channels-last product and writes
// the channels-first outputs. Both go through a shared-memory tile of 32 channels x 32 positions,
// so that reads and writes are coalesced on both sides.
#pragma once
#include "channels_last.h"
#include "gemm_epilogue.cuh"
#ifdef FUSETUNE_CUDNN_LINKED
#include "cudnn_conv.h"
#endif

namespace fusetune {

// [n, c, s] -> [n, s, c] for in and out contiguous; grid (ceil(s / 32), ceil(c / 32), n). (A
// template only so that several kernel sources of one extension may include it.)
template <class T>
__global__ void __launch_bounds__(kTile * kTileRows)
    to_channels_last_kernel(const T* __restrict__ in, T* __restrict__ out, long long c, long long s) {
  __shared__ T tile[kTile][kTile + 1];
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * c * s;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long long ci = c0 + i, si = s0 + threadIdx.x;
    if (ci < c && si < s) tile[i][threadIdx.x] = in[base + ci * s + si];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long long si = s0 + i, ci = c0 + threadIdx.x;
    if (ci < c && si < s) out[base + si * c + ci] = tile[threadIdx.x][i];
  }
}

// The group's epilogue over a channels-last product [n, SPATIAL, CHANNELS] in slot
// Op::kFullSlot - 1 (as gemm_epilogue_kernel has it): every output element at its channels-first
// index idx = (b * CHANNELS + c) * SPATIAL + s is Op::apply of the product there and the group's
// other inputs at idx. Grid (ceil(SPATIAL / 32), ceil(CHANNELS / 32), n).
template <long long CHANNELS, long long SPATIAL, int MATH, class Op>
__global__ void __launch_bounds__(kTile * kTileRows) channels_last_epilogue_kernel(const KernelArgs a) {
  static_assert(Op::kFullSlot >= 1, "the product needs the slot before the full inputs");
  __shared__ float tile[kTile][kTile + 1];
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * CHANNELS * SPATIAL;
  const float* product = a.ptr[Op::kFullSlot - 1];
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long long si = s0 + i, ci = c0 + threadIdx.x;
    if (ci < CHANNELS && si < SPATIAL) tile[threadIdx.x][i] = product[base + si * CHANNELS + ci];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const long long ci = c0 + i, si = s0 + threadIdx.x;
    if (ci >= CHANNELS || si >= SPATIAL) continue;
    const long long idx = base + ci * SPATIAL + si;
    float x[Op::kIn];
    float y[out_count<Op>()];
    x[0] = tile[i][threadIdx.x];
#pragma unroll
    for (int s = 0; s < Op::kFull; ++s) x[1 + s] = a.ptr[Op::kFullSlot + s][idx];
    Op::template apply<MATH>(a, idx, x, y);
#pragma unroll
    for (int o = 0; o < Op::kOut; ++o) a.ptr[Op::kOutSlot + o][idx] = y[o];
  }
}

#ifdef FUSETUNE_CUDNN_LINKED  // the extension's host side (cudnn_conv.h's CudnnBaked::Transpose)
inline void launch_to_channels_last(const float* in, float* out, const ConvDims& d, cudaStream_t stream) {
  const LaunchDims l = channels_last_launch(d);
  to_channels_last_kernel<float><<<dim3(l.grid[0], l.grid[1], l.grid[2]), dim3(l.block[0], l.block[1], l.block[2]), 0, stream>>>(
      in, out, d.c, d.s);
}
#endif

}  // namespace fusetune
