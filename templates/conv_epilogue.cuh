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

// Both kernels move a tile of kTile x kTile floats through shared memory (padded by a column, so
// that a column's reads hit 32 banks), V neighbours per access on both sides where the sizes
// and pointers allow pairs (V = 2), else single floats: in the probe (tests/gpu/bench, docs/PERF.md)
// pairs move 3.8-4.0 TB/s, single floats 3.2-3.4, against a copy's 4.0-4.2.

// Loads the tile of the row-major [rows, cols] matrix `in` whose corner is (r0, q0) into
// tile[row][col], V neighbours of a row per load, each thread's loads all issued before its
// shared-memory stores. Elements outside the matrix are left unset; the callers' stores skip them.
template <int V>
__device__ __forceinline__ void load_tile(float (*tile)[kTile + 1], const float* __restrict__ in, long long rows,
                                          long long cols, long long r0, long long q0) {
  constexpr int kPerRow = kTile / V, kEach = kTile * kPerRow / kTileThreads;
  float v[kEach][V];
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * kTileThreads, i = u / kPerRow, j = V * (u % kPerRow);
    if (r0 + i < rows && q0 + j < cols) load_vec<V>(in + (r0 + i) * cols + q0 + j, v[e]);
  }
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * kTileThreads, i = u / kPerRow, j = V * (u % kPerRow);
#pragma unroll
    for (int k = 0; k < V; ++k) tile[i][j + k] = v[e][k];
  }
}

// Calls f(i, j, w) for the tile's columns in runs of V rows: w[k] = tile[i + k][j].
template <int V, class F>
__device__ __forceinline__ void for_tile_columns(const float (*tile)[kTile + 1], F f) {
  constexpr int kPerCol = kTile / V, kEach = kTile * kPerCol / kTileThreads;
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * kTileThreads, j = u / kPerCol, i = V * (u % kPerCol);
    float w[V];
#pragma unroll
    for (int k = 0; k < V; ++k) w[k] = tile[i + k][j];
    f(i, j, w);
  }
}

template <int V>
__device__ __forceinline__ void transpose_tile(float (*tile)[kTile + 1], const float* __restrict__ in,
                                               float* __restrict__ out, long long c, long long s, long long c0,
                                               long long s0) {
  load_tile<V>(tile, in, c, s, c0, s0);  // [channel][position]
  __syncthreads();
  for_tile_columns<V>(tile, [&](int ci, int si, const float (&w)[V]) {
    if (c0 + ci < c && s0 + si < s) store_vec<V>(out + (s0 + si) * c + c0 + ci, w);
  });
}

// [n, c, s] -> [n, s, c] for in and out contiguous; grid (ceil(s / kTile), ceil(c / kTile), n).
// (A template only so that several kernel sources of one extension may include it; T is float.)
template <class T>
__global__ void __launch_bounds__(kTileThreads)
    to_channels_last_kernel(const T* __restrict__ in, T* __restrict__ out, long long c, long long s) {
  __shared__ float tile[kTile][kTile + 1];
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * c * s;
  if (c % 2 == 0 && s % 2 == 0 && ((unsigned long long)in | (unsigned long long)out) % (2 * sizeof(float)) == 0)
    transpose_tile<2>(tile, in + base, out + base, c, s, c0, s0);
  else
    transpose_tile<1>(tile, in + base, out + base, c, s, c0, s0);
}

// V neighbouring positions of one channel in the group's epilogue: the outputs at channels-first
// indices idx .. idx + V - 1 are Op::apply of the product there (w) and the other inputs there.
template <int MATH, class Op, int V>
__device__ __forceinline__ void epilogue_run(const KernelArgs& a, long long idx, const float (&w)[V]) {
  float full[Op::kFull + 1][V];
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) load_full<Op, V>(a, s, idx, full[s]);
  float y[out_count<Op>()][V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float x[Op::kIn], yk[out_count<Op>()];
    x[0] = w[k];
#pragma unroll
    for (int s = 0; s < Op::kFull; ++s) x[1 + s] = full[s][k];
    Op::template apply<MATH>(a, idx + k, x, yk);
#pragma unroll
    for (int o = 0; o < Op::kOut; ++o) y[o][k] = yk[o];
  }
#pragma unroll
  for (int o = 0; o < Op::kOut; ++o) store_vec<V>(a.ptr[Op::kOutSlot + o] + idx, y[o]);
}

template <long long CHANNELS, long long SPATIAL, int MATH, class Op, int V>
__device__ __forceinline__ void channels_last_epilogue(float (*tile)[kTile + 1], const KernelArgs& a, long long base,
                                                       long long c0, long long s0) {
  load_tile<V>(tile, a.ptr[Op::kFullSlot - 1] + base, SPATIAL, CHANNELS, s0, c0);  // [position][channel]
  __syncthreads();
  for_tile_columns<V>(tile, [&](int si, int ci, const float (&w)[V]) {
    if (c0 + ci < CHANNELS && s0 + si < SPATIAL)
      epilogue_run<MATH, Op, V>(a, base + (c0 + ci) * SPATIAL + s0 + si, w);
  });
}

// The group's epilogue over a channels-last product [n, SPATIAL, CHANNELS] in slot
// Op::kFullSlot - 1 (as gemm_epilogue_kernel has it): every output element at its channels-first
// index idx = (b * CHANNELS + c) * SPATIAL + s is Op::apply of the product there and the group's
// other inputs at idx. Grid (ceil(SPATIAL / kTile), ceil(CHANNELS / kTile), n).
template <long long CHANNELS, long long SPATIAL, int MATH, class Op>
__global__ void __launch_bounds__(kTileThreads) channels_last_epilogue_kernel(const KernelArgs a) {
  __shared__ float tile[kTile][kTile + 1];
  const long long s0 = (long long)blockIdx.x * kTile, c0 = (long long)blockIdx.y * kTile;
  const long long base = (long long)blockIdx.z * CHANNELS * SPATIAL;
  if (CHANNELS % 2 == 0 && SPATIAL % 2 == 0 && vector_aligned<ProductFirst<Op, false>, 2>(a))
    channels_last_epilogue<CHANNELS, SPATIAL, MATH, Op, 2>(tile, a, base, c0, s0);
  else
    channels_last_epilogue<CHANNELS, SPATIAL, MATH, Op, 1>(tile, a, base, c0, s0);
}

#ifdef FUSETUNE_CUDNN_LINKED  // the extension's host side (cudnn_conv.h's CudnnBaked::Transpose)
inline void launch_to_channels_last(const float* in, float* out, const ConvDims& d, cudaStream_t stream) {
  const LaunchDims l = channels_last_launch(d);
  to_channels_last_kernel<float><<<dim3(l.grid[0], l.grid[1], l.grid[2]), dim3(l.block[0], l.block[1], l.block[2]), 0, stream>>>(
      in, out, d.c, d.s);
}
#endif

}  // namespace fusetune
