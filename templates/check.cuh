// Correctness check run by the tuner on the GPU: compares a candidate's output with PyTorch's
// reference element-wise (|out - ref| <= atol + rtol * |ref|, NaN/Inf only where the reference
// has them; float16 and bfloat16 outputs compared as floats) and accumulates the squared norms
// for the relative-L2 check.
#pragma once

#include "half.cuh"

namespace fusetune {

struct CheckStats {
  unsigned long long n_bad;
  unsigned long long first_bad;  // smallest failing index (ULLONG_MAX if none)
  double sum_sq_diff;
  double sum_sq_ref;
  float max_abs_err;  // over finite pairs
  float pad;
};

__device__ __forceinline__ bool finite_(float x) { return x == x && fabsf(x) != __int_as_float(0x7f800000); }

}  // namespace fusetune

// out and ref hold T, read as floats by Load (float32, or a half type's 16 bits).
template <class T, float (*Load)(T)>
__device__ __forceinline__ void check_impl(const T* out, const T* ref, long long n, float atol, float rtol,
                                           fusetune::CheckStats* stats) {
  __shared__ double s_diff[256], s_ref[256];
  __shared__ float s_max[256];
  __shared__ unsigned long long s_bad[256], s_first[256];
  double diff = 0.0, refsq = 0.0;
  float maxerr = 0.f;
  unsigned long long bad = 0, first = ~0ULL;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float o = Load(out[i]), r = Load(ref[i]);
    bool ok;
    if (fusetune::finite_(r)) {
      const float err = fabsf(o - r);
      ok = fusetune::finite_(o) && err <= atol + rtol * fabsf(r);
      if (fusetune::finite_(o)) {
        maxerr = fmaxf(maxerr, err);
        diff += (double)err * err;
        refsq += (double)r * r;
      }
    } else {
      ok = (o == r) || (o != o && r != r);
    }
    if (!ok) {
      ++bad;
      if ((unsigned long long)i < first) first = (unsigned long long)i;
    }
  }
  const int t = threadIdx.x;
  s_diff[t] = diff; s_ref[t] = refsq; s_max[t] = maxerr; s_bad[t] = bad; s_first[t] = first;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (t < w) {
      s_diff[t] += s_diff[t + w];
      s_ref[t] += s_ref[t + w];
      s_max[t] = fmaxf(s_max[t], s_max[t + w]);
      s_bad[t] += s_bad[t + w];
      s_first[t] = s_first[t] < s_first[t + w] ? s_first[t] : s_first[t + w];
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicAdd(&stats->sum_sq_diff, s_diff[0]);
    atomicAdd(&stats->sum_sq_ref, s_ref[0]);
    atomicMax(reinterpret_cast<int*>(&stats->max_abs_err), __float_as_int(s_max[0]));
    atomicAdd(&stats->n_bad, s_bad[0]);
    atomicMin(&stats->first_bad, s_first[0]);
  }
}

__device__ __forceinline__ float load_float(float x) { return x; }

extern "C" __global__ void fusetune_check(const float* out, const float* ref, long long n, float atol, float rtol,
                                          fusetune::CheckStats* stats) {
  check_impl<float, load_float>(out, ref, n, atol, rtol, stats);
}

extern "C" __global__ void fusetune_check_float16(const unsigned short* out, const unsigned short* ref, long long n,
                                                  float atol, float rtol, fusetune::CheckStats* stats) {
  check_impl<unsigned short, fusetune::f16_to_float>(out, ref, n, atol, rtol, stats);
}

extern "C" __global__ void fusetune_check_bfloat16(const unsigned short* out, const unsigned short* ref, long long n,
                                                   float atol, float rtol, fusetune::CheckStats* stats) {
  check_impl<unsigned short, fusetune::bf16_to_float>(out, ref, n, atol, rtol, stats);
}
