// Max and average pooling over 1-3 spatial dimensions, as one value of a fused elementwise chain:
// output element idx reduces its window of the input slot (the input's own strided view, leading
// batch/channel dimensions first). Written as PyTorch's max_pool*_with_indices (a NaN wins) and
// avg_pool* (padding counted or not, divisor_override) compute them. The generated Op includes
// this header only when its group pools.
#pragma once
#include "fusetune_args.h"

namespace fusetune {

// The window geometry of one pooling op and the input's spatial strides; the generated code
// passes it as a literal, which the compiler folds after inlining (every division below is by a
// constant).
template <int ND> struct PoolWindow {
  long long out[ND], in[ND], in_stride[ND];
  int kernel[ND], stride[ND], padding[ND], dilation[ND];
  int divisor;  // avg: divisor_override, 0 for none
};

// The window's taps from `start` (per spatial dimension), max or sum; CHECK: skip the taps
// outside the input (the window crosses the padding). TAPS is the window's size, so that the
// loop unrolls (up to kMaxUnrolledTaps): each tap is then a load at a constant offset from the
// window's origin, and its bounds check one compare per dimension, shared by the taps of a row.
constexpr int kMaxUnrolledTaps = 64;

template <int KIND, int ND, int TAPS, bool CHECK>
__device__ __forceinline__ float pool_taps(const float* base, const long long (&start)[ND], const PoolWindow<ND>& w) {
  long long origin = 0;
#pragma unroll
  for (int d = 0; d < ND; ++d) origin += start[d] * w.in_stride[d];
  const float* window = base + origin;
  float acc = KIND == 0 ? -__int_as_float(0x7f800000) : 0.f;
#pragma unroll(TAPS <= kMaxUnrolledTaps ? TAPS : 4)
  for (int t = 0; t < TAPS; ++t) {
    int rest = t;
    long long offset = 0;
    bool in_bounds = true;
#pragma unroll
    for (int d = ND - 1; d >= 0; --d) {
      const int step = (rest % w.kernel[d]) * (KIND == 0 ? w.dilation[d] : 1);
      rest /= w.kernel[d];
      if (CHECK) in_bounds &= (unsigned long long)(start[d] + step) < (unsigned long long)w.in[d];
      offset += step * w.in_stride[d];
    }
    if (CHECK && !in_bounds) continue;
    const float v = window[offset];
    if (KIND == 0) acc = (v > acc || v != v) ? v : acc;
    else acc += v;
  }
  return acc;
}

// KIND: 0 max, 1 average counting padding, 2 average over the elements inside the input only.
// `base`: the input at this output's batch and channel indices (the generated code computes it
// from the input's literal layout); `so`: the output's index within its spatial dimensions, an
// unsigned type as wide as they need.
template <int KIND, int ND, int TAPS, class I>
__device__ __forceinline__ float pool(const float* base, I so, const PoolWindow<ND>& w) {
  I o[ND];
#pragma unroll
  for (int d = ND - 1; d >= 0; --d) {
    o[d] = so % (I)w.out[d];
    so /= (I)w.out[d];
  }
  long long start[ND];
  long long pool_size = 1, inside = 1;
  bool interior = true;  // the whole window inside the input: no tap needs a bounds check
#pragma unroll
  for (int d = 0; d < ND; ++d) {
    start[d] = (long long)o[d] * w.stride[d] - w.padding[d];
    const long long end = start[d] + w.kernel[d] < w.in[d] + w.padding[d] ? start[d] + w.kernel[d] : w.in[d] + w.padding[d];
    pool_size *= end - start[d];
    const long long lo = start[d] > 0 ? start[d] : 0, hi = end < w.in[d] ? end : w.in[d];
    inside *= hi > lo ? hi - lo : 0;
    interior &= start[d] >= 0 && start[d] + (long long)(w.kernel[d] - 1) * (KIND == 0 ? w.dilation[d] : 1) < w.in[d];
  }
  const float acc = interior ? pool_taps<KIND, ND, TAPS, false>(base, start, w) : pool_taps<KIND, ND, TAPS, true>(base, start, w);
  if (KIND == 0) return acc;
  const long long divisor = w.divisor ? w.divisor : KIND == 1 ? pool_size : inside;
  return acc / (float)divisor;
}

}  // namespace fusetune
