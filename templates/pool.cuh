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

constexpr int kMaxUnrolledTaps = 64;  // windows up to this size are unrolled whole

// The distance between neighbouring taps along dimension d (average pooling has no dilation).
template <int KIND, int ND>
__device__ __forceinline__ int tap_step(const PoolWindow<ND>& w, int d) {
  return KIND == 0 ? w.dilation[d] : 1;
}

template <int KIND>
__device__ __forceinline__ float pool_tap(float acc, float v) {
  if (KIND == 0) return (v > acc || v != v) ? v : acc;
  return acc + v;
}

// N consecutive taps from `p`, which is 8-byte aligned: as float2 pairs, the odd one last.
template <int KIND, int N>
__device__ __forceinline__ float pool_pairs(float acc, const float* p) {
#pragma unroll(N / 2 > 0 && N / 2 <= kMaxUnrolledTaps ? N / 2 : 4)
  for (int c = 0; c + 1 < N; c += 2) {
    const float2 v = *reinterpret_cast<const float2*>(p + c);
    acc = pool_tap<KIND>(pool_tap<KIND>(acc, v.x), v.y);
  }
  return N % 2 ? pool_tap<KIND>(acc, p[N - 1]) : acc;
}

// pool_taps for a window inside the input whose last dimension is contiguous and has KW taps
// that start at a column of known parity (an even stride; the generator checks that every
// other stride is even too, and pool() that the input is 8-byte aligned): each row of the window
// is read as aligned float2 pairs (one load per pair of taps), in the same order as pool_taps (so
// sums round alike).
template <int KIND, int ND, int TAPS, int KW>
__device__ __forceinline__ float pool_rows_paired(const float* window, const PoolWindow<ND>& w) {
  float acc = KIND == 0 ? -__int_as_float(0x7f800000) : 0.f;
  constexpr int ROWS = TAPS / KW;
  const bool odd = (w.padding[ND - 1] & 1) != 0;  // the first column's parity: a literal, folded
#pragma unroll(TAPS <= kMaxUnrolledTaps ? ROWS : 1)
  for (int r = 0; r < ROWS; ++r) {
    int rest = r;
    long long offset = 0;
#pragma unroll
    for (int d = ND - 2; d >= 0; --d) {
      offset += (rest % w.kernel[d]) * tap_step<KIND>(w, d) * w.in_stride[d];
      rest /= w.kernel[d];
    }
    const float* row = window + offset;
    acc = odd ? pool_pairs<KIND, KW - 1>(pool_tap<KIND>(acc, row[0]), row + 1) : pool_pairs<KIND, KW>(acc, row);
  }
  return acc;
}

// The taps of the window at `window` (its first tap's address; `start`: that tap's index per
// spatial dimension), max or sum; CHECK: skip the taps outside the input (the window crosses the
// padding). TAPS is the window's size, so that the loop unrolls (up to kMaxUnrolledTaps): each tap
// is then a load at a constant offset from `window`, and its bounds check one compare per
// dimension, shared by the taps of a row.
template <int KIND, int ND, int TAPS, bool CHECK>
__device__ __forceinline__ float pool_taps(const float* window, const long long (&start)[ND], const PoolWindow<ND>& w) {
  float acc = KIND == 0 ? -__int_as_float(0x7f800000) : 0.f;
#pragma unroll(TAPS <= kMaxUnrolledTaps ? TAPS : 4)
  for (int t = 0; t < TAPS; ++t) {
    int rest = t;
    long long offset = 0;
    bool in_bounds = true;
#pragma unroll
    for (int d = ND - 1; d >= 0; --d) {
      const int step = (rest % w.kernel[d]) * tap_step<KIND>(w, d);
      rest /= w.kernel[d];
      if (CHECK) in_bounds &= (unsigned long long)(start[d] + step) < (unsigned long long)w.in[d];
      offset += step * w.in_stride[d];
    }
    if (CHECK && !in_bounds) continue;
    acc = pool_tap<KIND>(acc, window[offset]);
  }
  return acc;
}

// KIND: 0 max, 1 average counting padding, 2 average over the elements inside the input only.
// KW: the last dimension's kernel size where its taps may be read in pairs (pool_rows_paired),
// else 0. `base`: the input at this output's batch and channel indices (the generated code computes it
// from the input's literal layout); `so`: the output's index within its spatial dimensions, an
// unsigned type as wide as they need.
template <int KIND, int ND, int TAPS, int KW = 0, class I>
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
    interior &= start[d] >= 0 && start[d] + (long long)(w.kernel[d] - 1) * tap_step<KIND>(w, d) < w.in[d];
  }
  long long origin = 0;
#pragma unroll
  for (int d = 0; d < ND; ++d) origin += start[d] * w.in_stride[d];
  const float* window = base + origin;
  float acc;
  // (KW ? KW : 1: the paired instance exists for KW 0 too, and is never called there.)
  if (KW > 0 && interior && ((unsigned long long)base & 7) == 0) acc = pool_rows_paired<KIND, ND, TAPS, KW ? KW : 1>(window, w);
  else if (interior) acc = pool_taps<KIND, ND, TAPS, false>(window, start, w);
  else acc = pool_taps<KIND, ND, TAPS, true>(window, start, w);
  if (KIND == 0) return acc;
  const long long divisor = w.divisor ? w.divisor : KIND == 1 ? pool_size : inside;
  return acc / (float)divisor;
}

}  // namespace fusetune
