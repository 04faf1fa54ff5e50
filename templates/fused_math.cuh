// Device helpers that the generated fused expressions call, written to match PyTorch's
// definitions (NaN propagation included) in fp32.
#pragma once

namespace fusetune {

// MATH selects the arithmetic of transcendental functions, a tuning parameter checked like any
// other: 0 is CUDA's accurate libm, 1 the hardware approximations (ex2.approx, tanh.approx,
// about 2^-11 relative error), which keep memory-bound chains at the memory roofline.
template <int MATH> __device__ __forceinline__ float exp_(float x) { return MATH ? __expf(x) : expf(x); }
template <int MATH> __device__ __forceinline__ float log_(float x) { return MATH ? __logf(x) : logf(x); }
template <int MATH> __device__ __forceinline__ float sin_(float x) { return MATH ? __sinf(x) : sinf(x); }
template <int MATH> __device__ __forceinline__ float cos_(float x) { return MATH ? __cosf(x) : cosf(x); }
template <int MATH> __device__ __forceinline__ float tanh_(float x) {
  if (!MATH) return tanhf(x);
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ bool isnan_(float x) { return x != x; }
__device__ __forceinline__ float relu(float x) { return x > 0.f || isnan_(x) ? x : 0.f; }
template <int MATH> __device__ __forceinline__ float sigmoid(float x) {
  return MATH ? __fdividef(1.f, 1.f + __expf(-x)) : 1.f / (1.f + expf(-x));
}
__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
}
template <int MATH> __device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanh_<MATH>(inner));
}
__device__ __forceinline__ float elu(float x, float alpha, float scale, float input_scale) {
  return x > 0.f ? scale * x : scale * alpha * expm1f(x * input_scale);
}
__device__ __forceinline__ float leaky_relu(float x, float slope) { return x > 0.f ? x : x * slope; }
__device__ __forceinline__ float clamp_min(float x, float lo) { return isnan_(x) ? x : fmaxf(x, lo); }
__device__ __forceinline__ float clamp_max(float x, float hi) { return isnan_(x) ? x : fminf(x, hi); }
__device__ __forceinline__ float maximum(float a, float b) { return isnan_(a) || isnan_(b) ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float minimum(float a, float b) { return isnan_(a) || isnan_(b) ? a + b : fminf(a, b); }
__device__ __forceinline__ float sign(float x) { return (float)(x > 0.f) - (float)(x < 0.f); }
__device__ __forceinline__ float pow_(float x, float e) {
  if (e == 2.f) return x * x;
  if (e == 1.f) return x;
  if (e == 0.5f) return sqrtf(x);
  return powf(x, e);
}

// Size of a kernel's array of float outputs: an Op whose outputs are all int64 has kOut = 0.
template <class Op> __host__ __device__ constexpr int out_count() { return Op::kOut > 0 ? Op::kOut : 1; }

}  // namespace fusetune
