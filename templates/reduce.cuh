// Reduction of a strided input over some of its dimensions (sum, mean, max, min), one block per
// output element (grid-stride over outputs; reduce_thread_kernel below: one thread per output),
// with the group's elementwise epilogue fused: x[0] of
// Op::apply is the reduced value. The input is read through two views of the same tensor: slot 0
// over the kept dimensions (in output order) and slot 1 over the reduced ones; a.k is the number
// of reduced elements. Tuning parameters: BLOCK threads per output, ILP loads in flight per
// thread. KIND: 0 sum, 1 mean, 2 max, 3 min (a NaN wins, as in torch.amax). CONTIG: the reduced
// dimensions form one stride-1 run. First version (issue 5): no prologue fusion, no split of one
// output over several blocks, no coalescing across outputs for reductions over outer dimensions.
#pragma once
#include "fused_math.cuh"
#include "fusetune_args.h"

namespace fusetune {

template <int KIND>
struct ReduceOp {
  static constexpr bool kMax = KIND == 2, kMin = KIND == 3;
  __device__ __forceinline__ static float identity() {
    return kMax ? -__int_as_float(0x7f800000) : kMin ? __int_as_float(0x7f800000) : 0.f;
  }
  __device__ __forceinline__ static float combine(float acc, float v) {
    if (kMax) return (acc > v || acc != acc) ? acc : v;
    if (kMin) return (acc < v || acc != acc) ? acc : v;
    return acc + v;
  }
};

// Offset of element i (row-major over the view's dimensions) of slot `slot`; dimensions past
// the view's rank have size 0 in KernelArgs and are skipped.
__device__ __forceinline__ long long view_offset(const KernelArgs& a, int slot, long long i) {
  long long offset = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    const long long size = a.size[slot][d];
    if (size <= 0) continue;
    offset += (i % size) * a.stride[slot][d];
    i /= size;
  }
  return offset;
}

// Output o from its reduced value v: the mean's division, then the group's epilogue.
template <int KIND, class Op>
__device__ __forceinline__ void finish_output(const KernelArgs& a, long long o, float v) {
  float x[Op::kIn];
  float y[Op::kOut];
  x[0] = KIND == 1 ? v / (float)a.k : v;
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) x[1 + s] = a.ptr[Op::kFullSlot + s][o];
  Op::template apply<0>(a, o, x, y);
#pragma unroll
  for (int j = 0; j < Op::kOut; ++j) a.ptr[Op::kOutSlot + j][o] = y[j];
}

template <int BLOCK, int ILP, int KIND, bool CONTIG, class Op>
__global__ void __launch_bounds__(BLOCK) reduce_kernel(const KernelArgs a) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is a multiple of 32, at most 1024");
  using R = ReduceOp<KIND>;
  __shared__ float partial[BLOCK / 32];
  const long long n = a.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (long long o = blockIdx.x; o < a.numel; o += gridDim.x) {
    const float* row = a.ptr[0] + view_offset(a, 0, o);
    float acc[ILP];
#pragma unroll
    for (int u = 0; u < ILP; ++u) acc[u] = R::identity();
    for (long long r0 = threadIdx.x; r0 < n; r0 += (long long)BLOCK * ILP) {
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long r = r0 + (long long)u * BLOCK;
        if (r < n) acc[u] = R::combine(acc[u], row[CONTIG ? r : view_offset(a, 1, r)]);
      }
    }
    float v = acc[0];
#pragma unroll
    for (int u = 1; u < ILP; ++u) v = R::combine(v, acc[u]);
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, s));
    if (BLOCK > 32) {
      if (lane == 0) partial[warp] = v;
      __syncthreads();
      v = lane < BLOCK / 32 ? partial[lane] : R::identity();
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, s));
      __syncthreads();  // partial is reused by the next output
    }
    if (threadIdx.x == 0) finish_output<KIND, Op>(a, o, v);
  }
}

// One thread per output: for reductions over outer or middle dimensions, where neighbouring
// outputs are neighbours in memory and a warp's loads coalesce (reduce_kernel's block per output
// would read one element per 32-byte sector there). The reduced elements are visited with an
// odometer over the reduced view's dimensions, without divisions.
template <int BLOCK, int KIND, class Op>
__global__ void __launch_bounds__(BLOCK) reduce_thread_kernel(const KernelArgs a) {
  using R = ReduceOp<KIND>;
  const long long n = a.k;
  for (long long o = (long long)blockIdx.x * BLOCK + threadIdx.x; o < a.numel; o += (long long)gridDim.x * BLOCK) {
    const float* row = a.ptr[0] + view_offset(a, 0, o);
    long long idx[kMaxRank] = {0, 0, 0, 0, 0, 0};
    long long offset = 0;
    float acc = R::identity();
    for (long long r = 0; r < n; ++r) {
      acc = R::combine(acc, row[offset]);
#pragma unroll
      for (int d = kMaxRank - 1; d >= 0; --d) {  // next reduced element
        const long long size = a.size[1][d];
        if (size <= 0) continue;
        offset += a.stride[1][d];
        if (++idx[d] < size) break;
        offset -= idx[d] * a.stride[1][d];
        idx[d] = 0;
      }
    }
    finish_output<KIND, Op>(a, o, acc);
  }
}

}  // namespace fusetune
