// Fused elementwise kernel: every output element is Op::apply of the inputs at the same linear
// index. Tuning parameters: threads per block, vector width (floats per load), independent
// vectors per thread (ILP) and the transcendental arithmetic (MATH, see fused_math.cuh).
// Op is generated per kernel group by the tuner.
#pragma once
#include "fusetune_args.h"
#include "fused_math.cuh"

namespace fusetune {

template <int VEC> struct VecT;
template <> struct VecT<1> { typedef float type; };
template <> struct VecT<2> { typedef float2 type; };
template <> struct VecT<4> { typedef float4 type; };

template <int VEC>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[VEC]) {
  const typename VecT<VEC>::type t = *reinterpret_cast<const typename VecT<VEC>::type*>(p);
  const float* f = reinterpret_cast<const float*>(&t);
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = f[j];
}

template <int VEC>
__device__ __forceinline__ void store_vec(float* p, const float (&v)[VEC]) {
  typename VecT<VEC>::type t;
  float* f = reinterpret_cast<float*>(&t);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] = v[j];
  *reinterpret_cast<typename VecT<VEC>::type*>(p) = t;
}

// Inputs [kFullSlot, kFullSlot + kFull) and outputs [kOutSlot, kOutSlot + kOut) are contiguous
// with the index space; Op::apply loads any broadcast inputs itself, and stores int64 outputs
// (after the kOut float ones) itself.
template <class Op, int VEC>
__device__ __forceinline__ bool vector_aligned(const KernelArgs& a) {
  unsigned long long bits = 0;
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) bits |= (unsigned long long)a.ptr[Op::kFullSlot + s];
#pragma unroll
  for (int s = 0; s < Op::kOut; ++s) bits |= (unsigned long long)a.ptr[Op::kOutSlot + s];
  return (bits % (VEC * sizeof(float))) == 0;
}

template <class Op, int MATH>
__device__ __forceinline__ void apply_scalar(const KernelArgs& a, long long i) {
  float in[Op::kIn];
  float out[out_count<Op>()];
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) in[s] = a.ptr[Op::kFullSlot + s][i];
  Op::template apply<MATH>(a, i, in, out);
#pragma unroll
  for (int o = 0; o < Op::kOut; ++o) a.ptr[Op::kOutSlot + o][i] = out[o];
}

template <int BLOCK, int VEC, int ILP, int MATH, class Op>
__device__ __forceinline__ void elementwise_body(const KernelArgs& a) {
  const long long n = a.numel;
  const long long chunk = (long long)BLOCK * VEC * ILP;
  const bool aligned = vector_aligned<Op, VEC>(a);
  for (long long base = (long long)blockIdx.x * chunk; base < n; base += (long long)gridDim.x * chunk) {
    if (aligned && base + chunk <= n) {
      float in[ILP][Op::kIn][VEC];
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long i = base + ((long long)u * BLOCK + threadIdx.x) * VEC;
#pragma unroll
        for (int s = 0; s < Op::kFull; ++s) load_vec<VEC>(a.ptr[Op::kFullSlot + s] + i, in[u][s]);
      }
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long i = base + ((long long)u * BLOCK + threadIdx.x) * VEC;
        float out[out_count<Op>()][VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          float x[Op::kIn];
          float y[out_count<Op>()];
#pragma unroll
          for (int s = 0; s < Op::kFull; ++s) x[s] = in[u][s][j];
          Op::template apply<MATH>(a, i + j, x, y);
#pragma unroll
          for (int o = 0; o < Op::kOut; ++o) out[o][j] = y[o];
        }
#pragma unroll
        for (int o = 0; o < Op::kOut; ++o) store_vec<VEC>(a.ptr[Op::kOutSlot + o] + i, out[o]);
      }
    } else {
      for (long long i = base + threadIdx.x; i < n && i < base + chunk; i += BLOCK) apply_scalar<Op, MATH>(a, i);
    }
  }
}

template <int BLOCK, int VEC, int ILP, int MATH, class Op>
__global__ void __launch_bounds__(BLOCK) elementwise_kernel(const KernelArgs a) {
  elementwise_body<BLOCK, VEC, ILP, MATH, Op>(a);
}

}  // namespace fusetune
