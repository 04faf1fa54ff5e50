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

// x.half() / x.bfloat16() inside a model: the value those casts give, held as a float.
__device__ __forceinline__ float round_f16(float f) { return f16_to_float(float_to_f16(f)); }
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace fusetune
