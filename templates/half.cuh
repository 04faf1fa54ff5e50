// Half-precision storage (float16, bfloat16). fusetune computes in float32: a kernel converts a
// half tensor's elements as it loads them and its results as it stores them (round to nearest
// even, as PyTorch's casts). The elements travel as their 16 bits; the conversions are PTX, so
// that NVRTC needs no CUDA header (it is given the template folder only).
#pragma once

namespace fusetune {

__device__ __forceinline__ float f16_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ unsigned short float_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ float bf16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

__device__ __forceinline__ unsigned short float_to_bf16(float f) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

// Two floats as two halves in 32 bits, lo in the low 16, rounded as float_to_f16 / float_to_bf16
// round (cvt's .f16x2 / .bf16x2 forms put their first source in the high half).
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float half_to_float(unsigned short h, int kind) {
  return kind == 1 ? f16_to_float(h) : bf16_to_float(h);
}

// V consecutive halves at q as one vector (V * 2 bytes, which q must be aligned to), converted
// to or from floats; kind 1: float16, 2: bfloat16 (gemm_tma_split.h's kGemmTma* codes).
template <int V>
__device__ __forceinline__ void load_halves(const unsigned short* q, int kind, float (&v)[V]) {
  static_assert(V == 1 || V == 2 || V == 4, "vectors of 1, 2 or 4 elements");
  if constexpr (V == 1) {
    v[0] = half_to_float(*q, kind);
  } else {
    unsigned w[V / 2];
    if constexpr (V == 2) {
      w[0] = *reinterpret_cast<const unsigned*>(q);
    } else {
      const uint2 t = *reinterpret_cast<const uint2*>(q);
      w[0] = t.x, w[1] = t.y;
    }
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = half_to_float((unsigned short)(w[j / 2] >> 16 * (j % 2)), kind);
  }
}

template <int V>
__device__ __forceinline__ void store_halves(unsigned short* q, int kind, const float (&v)[V]) {
  static_assert(V == 1 || V == 2 || V == 4, "vectors of 1, 2 or 4 elements");
  unsigned h[V > 1 ? V / 2 : 1];
#pragma unroll
  for (int j = 0; j + 1 < V; j += 2) h[j / 2] = kind == 1 ? pack_f16x2(v[j], v[j + 1]) : pack_bf16x2(v[j], v[j + 1]);
  if constexpr (V == 1)
    *q = kind == 1 ? float_to_f16(v[0]) : float_to_bf16(v[0]);
  else if constexpr (V == 2)
    *reinterpret_cast<unsigned*>(q) = h[0];
  else
    *reinterpret_cast<uint2*>(q) = make_uint2(h[0], h[1]);
}

// The half outputs of a generated Op (plan_finalize.cpp): kHalfOut of them after the kOut float
// ones, bit h of kHalfOutBf16 set where output h is bfloat16; none where Op does not declare them.
// kind(h) is output h's code for load_halves / store_halves.
template <class Op, class = void>
struct HalfOutputs {
  static constexpr int kCount = 0;
  static constexpr unsigned kBf16 = 0;
  __host__ __device__ static constexpr int kind(int) { return 0; }
};
template <class Op>
struct HalfOutputs<Op, decltype(void(Op::kHalfOut))> {
  static constexpr int kCount = Op::kHalfOut;
  static constexpr unsigned kBf16 = Op::kHalfOutBf16;
  __host__ __device__ static constexpr int kind(int h) { return (kBf16 >> h & 1u) ? 2 : 1; }
};

// The kinds of a generated Op's full inputs (plan_finalize.cpp): 2 bits per input in kFullHalf
// (kBits), 0 float32, 1 float16, 2 bfloat16; all float32 where Op does not declare it.
template <class Op, class = void>
struct FullKinds {
  static constexpr unsigned kBits = 0;
  __host__ __device__ static constexpr int kind(int) { return 0; }
};
template <class Op>
struct FullKinds<Op, decltype(void(Op::kFullHalf))> {
  static constexpr unsigned kBits = Op::kFullHalf;
  __host__ __device__ static constexpr int kind(int s) { return (int)(kBits >> 2 * s & 3u); }
};

// x.half() / x.bfloat16() inside a model: the value those casts give, held as a float.
__device__ __forceinline__ float round_f16(float f) { return f16_to_float(float_to_f16(f)); }
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace fusetune
