// Fused elementwise kernel: every output element is Op::apply of the inputs at the same linear
// index. Tuning parameters: threads per block, vector width (elements per load), independent
// vectors per thread (ILP) and the transcendental arithmetic (MATH, see fused_math.cuh).
// Op is generated per kernel group by the tuner. Full inputs and outputs may hold float16 or
// bfloat16 (FullKinds, HalfOutputs: half.cuh); they move as vectors of VEC halves.
#pragma once
#include "fusetune_args.h"
#include "fused_math.cuh"
#include "half.cuh"

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

// Inputs [kFullSlot, kFullSlot + kFull) and outputs [kOutSlot, kOutSlot + kOut + kHalfOut) are
// contiguous with the index space; Op::apply loads any broadcast inputs itself, and stores int64
// outputs (after the float and half ones) itself.
template <class Op, int VEC>
__device__ __forceinline__ bool vector_aligned(const KernelArgs& a) {
  unsigned long long bits = 0, half_bits = 0;
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s)
    (FullKinds<Op>::kind(s) ? half_bits : bits) |= (unsigned long long)a.ptr[Op::kFullSlot + s];
#pragma unroll
  for (int s = 0; s < Op::kOut; ++s) bits |= (unsigned long long)a.ptr[Op::kOutSlot + s];
#pragma unroll
  for (int h = 0; h < HalfOutputs<Op>::kCount; ++h) half_bits |= (unsigned long long)a.ptr[Op::kOutSlot + Op::kOut + h];
  return bits % (VEC * sizeof(float)) == 0 && half_bits % (VEC * sizeof(unsigned short)) == 0;
}

// Full input s's VEC elements from index i.
template <class Op, int VEC>
__device__ __forceinline__ void load_full(const KernelArgs& a, int s, long long i, float (&v)[VEC]) {
  const int kind = FullKinds<Op>::kind(s);
  if (kind)
    load_halves<VEC>(reinterpret_cast<const unsigned short*>(a.ptr[Op::kFullSlot + s]) + i, kind, v);
  else
    load_vec<VEC>(a.ptr[Op::kFullSlot + s] + i, v);
}

// Op::apply, leaving half outputs in y after the float ones where Op has any (kHalfInY).
template <class Op, int MATH>
__device__ __forceinline__ void apply_to_y(const KernelArgs& a, long long i, const float* x, float* y) {
  if constexpr (HalfOutputs<Op>::kCount > 0)
    Op::template apply<MATH, false, true>(a, i, x, y);
  else
    Op::template apply<MATH>(a, i, x, y);
}

template <class Op, int MATH>
__device__ __forceinline__ void apply_scalar(const KernelArgs& a, long long i) {
  float in[Op::kIn];
  float out[out_count<Op>()];
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) {
    float v[1];
    load_full<Op, 1>(a, s, i, v);
    in[s] = v[0];
  }
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
        for (int s = 0; s < Op::kFull; ++s) load_full<Op, VEC>(a, s, i, in[u][s]);
      }
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long i = base + ((long long)u * BLOCK + threadIdx.x) * VEC;
        constexpr int kHalf = HalfOutputs<Op>::kCount, kAll = Op::kOut + kHalf > 0 ? Op::kOut + kHalf : 1;
        float out[kAll][VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          float x[Op::kIn];
          float y[kAll];
#pragma unroll
          for (int s = 0; s < Op::kFull; ++s) x[s] = in[u][s][j];
          apply_to_y<Op, MATH>(a, i + j, x, y);
#pragma unroll
          for (int o = 0; o < Op::kOut + kHalf; ++o) out[o][j] = y[o];
        }
#pragma unroll
        for (int o = 0; o < Op::kOut; ++o) store_vec<VEC>(a.ptr[Op::kOutSlot + o] + i, out[o]);
#pragma unroll
        for (int h = 0; h < kHalf; ++h)
          store_halves<VEC>(reinterpret_cast<unsigned short*>(a.ptr[Op::kOutSlot + Op::kOut + h]) + i,
                            HalfOutputs<Op>::kind(h), out[Op::kOut + h]);
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
