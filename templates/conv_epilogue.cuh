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

// [n, c, s] -> [n, s, c] for in and out contiguous; grid (ceil(s / kTile), ceil(c / kTile), n).
// Each thread issues all its loads before it stores any into the tile (0.48 ms for depthwise_conv2d's
// 1.6 GB x, where one load and store at a time took 0.57: docs/PERF.md). (A template only so that
// several kernel sources of one extension may include it.)
template <class T>
__global__ void __launch_bounds__(kTileThreads)
    to_channels_last_kernel(const T* __restrict__ in, T* __restrict__ out, long long c, long long s) {
  __shared__ T tile[kTile][kTile + 1];  // [channel][position], padded: the column reads hit 32 banks
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * c * s;
  T v[kTileEach];
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {  // along the positions of a channel
    const int t = threadIdx.x + e * kTileThreads, ci = t / kTile, si = t % kTile;
    v[e] = c0 + ci < c && s0 + si < s ? in[base + (c0 + ci) * s + s0 + si] : T(0);
  }
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {
    const int t = threadIdx.x + e * kTileThreads;
    tile[t / kTile][t % kTile] = v[e];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {  // along the channels of a position
    const int t = threadIdx.x + e * kTileThreads, si = t / kTile, ci = t % kTile;
    if (c0 + ci < c && s0 + si < s) out[base + (s0 + si) * c + c0 + ci] = tile[ci][si];
  }
}

// The group's epilogue over a channels-last product [n, SPATIAL, CHANNELS] in slot
// Op::kFullSlot - 1 (as gemm_epilogue_kernel has it): every output element at its channels-first
// index idx = (b * CHANNELS + c) * SPATIAL + s is Op::apply of the product there and the group's
// other inputs at idx. Grid (ceil(SPATIAL / kTile), ceil(CHANNELS / kTile), n); the tile moves
// as to_channels_last_kernel's does.
template <long long CHANNELS, long long SPATIAL, int MATH, class Op>
__global__ void __launch_bounds__(kTileThreads) channels_last_epilogue_kernel(const KernelArgs a) {
  static_assert(Op::kFullSlot >= 1, "the product needs the slot before the full inputs");
  __shared__ float tile[kTile][kTile + 1];  // [position][channel]
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * CHANNELS * SPATIAL;
  const float* product = a.ptr[Op::kFullSlot - 1];
  float v[kTileEach];
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {  // along the channels of a position
    const int t = threadIdx.x + e * kTileThreads, si = t / kTile, ci = t % kTile;
    v[e] = c0 + ci < CHANNELS && s0 + si < SPATIAL ? product[base + (s0 + si) * CHANNELS + c0 + ci] : 0.f;
  }
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {
    const int t = threadIdx.x + e * kTileThreads;
    tile[t / kTile][t % kTile] = v[e];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kTileEach; ++e) {  // along the positions of a channel
    const int t = threadIdx.x + e * kTileThreads, ci = t / kTile, si = t % kTile;
    if (c0 + ci >= CHANNELS || s0 + si >= SPATIAL) continue;
    const long long idx = base + (c0 + ci) * SPATIAL + s0 + si;
    float x[Op::kIn];
    float y[out_count<Op>()];
    x[0] = tile[si][ci];
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
