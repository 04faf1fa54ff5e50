// Row kernels: reductions (sum, mean, max, min, prod, argmax, argmin) over any dimensions with
// the elementwise chain before them fused into their loads and the chain after them fused, both
// at the reduced shape and again over every element of the row (softmax's division, a norm's
// scaling). Every tensor is a view over the domain with the kept dimensions first (one row per
// output, a.numel rows) and the reduced ones last (a.k elements per row); Op::row_offset and Op::elem_offset give the offsets in each tensor with its
// sizes and strides as literals.
// A row is read once per pass: pass P folds Op::values<P> into the statistics of pass P, then
// Op::after<P> turns them into per-row values (red[]); a last pass writes Op::out for every
// element when the group has such outputs. A sum of exp(a - max a) is folded online in the
// maximum's pass (statistic kind 3, rescaled whenever the maximum grows), so softmax reads a row
// twice and logsumexp once.
// reduce_kernel: BLOCK threads per row, ILP loads in flight, VEC floats per load (where V
// elements are one aligned vector, or one broadcast value, in every tensor: Row::vector_head);
// reduce_thread_kernel: ROWS x RVEC neighbouring rows per block (coalesced across rows when the
// reduced dimensions are outer ones; RVEC of them per thread, moved as vectors), SPLIT threads
// sharing each thread's rows, the first CACHE elements of each thread kept in registers so that
// short rows are read from memory once whatever the number of passes; reduce_split_kernel:
// CHUNKS blocks per row (few rows, one pass); reduce_cluster_kernel: a thread-block cluster per
// row, the row kept in its registers between passes (reduce_cluster_smem_kernel: in shared
// memory); reduce_tile_kernel: as reduce_thread_kernel with a block's rows kept whole in shared
// memory. MATH: see fused_math.cuh.
#pragma once
#include "elementwise.cuh"
#include "fused_math.cuh"
#include "fusetune_args.h"
#include "half.cuh"
#include "reduce_limits.h"

namespace fusetune {

// kStatArgMax / kStatArgMin: the index of the row's first maximum (minimum), a float (exact below
// 2^24), next to its partner kStatMax (kStatMin) statistic at a lower index; NaN counts as the
// extreme, as in torch.
enum : int { kStatSum = 0, kStatMax = 1, kStatMin = 2, kStatExpSum = 3, kStatProd = 4, kStatArgMax = 5, kStatArgMin = 6 };

__host__ __device__ constexpr bool is_arg_stat(int kind) { return kind == kStatArgMax || kind == kStatArgMin; }

__device__ __forceinline__ float max_nan(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float min_nan(float a, float b) { return (a < b || a != a) ? a : b; }

// exp(from - to), exactly 1 when both are the same infinity.
template <int MATH> __device__ __forceinline__ float exp_rescale(float from, float to) {
  return from == to ? 1.f : exp_<MATH>(from - to);
}

// Sum of exp(a - shift) from the online pair: s = sum of exp(a - m), m = max of a.
template <int MATH> __device__ __forceinline__ float expsum_value(float s, float m, float shift) {
  return s * exp_rescale<MATH>(m, shift);
}

// x / r for a per-row r; MATH 1: x * (1 / r), the reciprocal computed once per row (within
// 1.5 ulp of the quotient; a denormal r below 2^-128 gives an infinite reciprocal).
template <int MATH> __device__ __forceinline__ float div_by_row(float x, float r) { return MATH ? x * (1.f / r) : x / r; }

template <class Op> __device__ __forceinline__ float stat_identity(int i) {
  const int kind = Op::stat_kind(i);
  return kind == kStatMax ? -__int_as_float(0x7f800000)
         : kind == kStatMin || is_arg_stat(kind) ? __int_as_float(0x7f800000)  // an arg: after every index
         : kind == kStatProd ? 1.f : 0.f;
}

// Whether the other extreme b at index bi replaces a at index ai: strictly beyond it, or a NaN
// (the first NaN wins), or equal at an earlier index.
template <bool MAX> __device__ __forceinline__ bool arg_takes(float a, float ai, float b, float bi) {
  if (a != a) return b != b && bi < ai;
  if (b != b) return true;
  return (MAX ? b > a : b < a) || (b == a && bi < ai);
}

// Whether a statistic of this kind combines two partials by itself (sum, product, maximum,
// minimum); an arg needs its partner's values, an exp-sum its partner's maxima.
__host__ __device__ constexpr bool is_plain_stat(int kind) {
  return kind == kStatSum || kind == kStatProd || kind == kStatMax || kind == kStatMin;
}

// Two partials of a plain statistic of this kind combined.
__device__ __forceinline__ float combine_plain(int kind, float a, float b) {
  return kind == kStatSum ? a + b : kind == kStatProd ? a * b : kind == kStatMax ? max_nan(a, b) : min_nan(a, b);
}

// Merges another partial set of statistics of pass P into acc. An ExpSum or an arg is merged
// before its partner (higher index first) so that it sees both partners before they are combined.
template <class Op, int P, int MATH>
__device__ __forceinline__ void merge(float* acc, const float* other) {
#pragma unroll
  for (int i = Op::kStats - 1; i >= 0; --i) {
    if (Op::stat_pass(i) != P) continue;
    const int kind = Op::stat_kind(i);
    if (is_plain_stat(kind)) {
      acc[i] = combine_plain(kind, acc[i], other[i]);
    } else if (is_arg_stat(kind)) {
      const int p = Op::stat_partner(i);
      const bool take = kind == kStatArgMax ? arg_takes<true>(acc[p], acc[i], other[p], other[i])
                                            : arg_takes<false>(acc[p], acc[i], other[p], other[i]);
      if (take) acc[i] = other[i];
    } else {  // the sum whose maximum is smaller is rescaled to the larger: one exponential
      const int p = Op::stat_partner(i);
      const bool up = other[p] > acc[p];  // NaN in either: r is NaN, and so is the sum
      const float r = exp_rescale<MATH>(up ? acc[p] : other[p], up ? other[p] : acc[p]);
      acc[i] = up ? acc[i] * r + other[i] : acc[i] + other[i] * r;
    }
  }
}

// Folds the values v of element e of a row into the statistics of pass P: the element is a
// partial set of its own (an ExpSum of one element is exp(v - v) = 1, its maximum v; an arg is e).
template <class Op, int P, int MATH>
__device__ __forceinline__ void fold(float* acc, const float* v, long long e) {
  float one[Op::kStats];
#pragma unroll
  for (int i = 0; i < Op::kStats; ++i) {
    const int kind = Op::stat_kind(i);
    one[i] = kind == kStatExpSum ? 1.f : is_arg_stat(kind) ? (float)e : v[i];
  }
  merge<Op, P, MATH>(acc, one);
}

template <class Op> __device__ __forceinline__ void init_stats(float* acc) {
#pragma unroll
  for (int i = 0; i < Op::kStats; ++i) acc[i] = stat_identity<Op>(i);
}

// ---- Scans (cumsum, cumprod): inclusive along the row, in the final pass.

template <class Op> constexpr int kScanSlots = Op::kScans > 0 ? Op::kScans : 1;

template <class Op> __device__ __forceinline__ float scan_combine(int i, float a, float b) {
  return Op::scan_kind(i) == 1 ? a * b : a + b;
}
template <class Op> __device__ __forceinline__ float scan_identity(int i) { return Op::scan_kind(i) == 1 ? 1.f : 0.f; }

// The values of the scans at one element (identities where there is no element).
template <class Op, int MATH>
__device__ __forceinline__ void scan_inputs(const float* x, const float* red, bool present, float (&sv)[kScanSlots<Op>]) {
#pragma unroll
  for (int i = 0; i < kScanSlots<Op>; ++i) sv[i] = scan_identity<Op>(i);
  if (Op::kScans > 0 && present) Op::template scan_values<MATH>(x, red, sv);
}

// Across the block in thread order: v (each thread's total) becomes the combination of the
// totals of the threads before it; `total` gets the block's. Every thread must call it.
template <class Op, int BLOCK>
__device__ __forceinline__ void block_exclusive_scan(float (&v)[kScanSlots<Op>], float (&total)[kScanSlots<Op>],
                                                     float (*warp_totals)[32]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < kScanSlots<Op>; ++i) {
    float inc = v[i];
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float t = __shfl_up_sync(0xffffffffu, inc, off);
      if (lane >= off) inc = scan_combine<Op>(i, t, inc);
    }
    const float before = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 31) warp_totals[i][warp] = inc;
    __syncthreads();
    float prefix = scan_identity<Op>(i), all = scan_identity<Op>(i);
    for (int w = 0; w < BLOCK / 32; ++w) {
      if (w < warp) prefix = scan_combine<Op>(i, prefix, warp_totals[i][w]);
      all = scan_combine<Op>(i, all, warp_totals[i][w]);
    }
    v[i] = lane == 0 ? prefix : scan_combine<Op>(i, prefix, before);
    total[i] = all;
    __syncthreads();  // warp_totals is reused
  }
}

// Slot s's elements: float32 (Op::slot_kind 0), float16 (1) / bfloat16 (2) inputs converted as
// they load and outputs stored rounding, or bool (3: one byte, 0 or 1) inputs.
// Ops without such slots (Op::kTypedSlots false) take the float32 code alone.
template <class Op> __device__ __forceinline__ unsigned long long slot_bytes(int s) {
  if constexpr (Op::kTypedSlots)
    return Op::slot_kind(s) == 0 ? sizeof(float) : Op::slot_kind(s) == 3 ? 1 : sizeof(unsigned short);
  else
    return sizeof(float);
}

// Element `off` of slot s from its row pointer p (a float* that points at a half or bool element
// where the slot holds those).
template <class Op> __device__ __forceinline__ float* slot_at(float* p, int s, long long off) {
  if constexpr (Op::kTypedSlots) {
    if (Op::slot_kind(s) == 3) return reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(p) + off);
    if (Op::slot_kind(s) != 0) return reinterpret_cast<float*>(reinterpret_cast<unsigned short*>(p) + off);
  }
  return p + off;
}

// V bools (bytes 0 / 1) from q as floats: one vector of V bytes (q aligned to it), or q[0]
// repeated where `same`.
template <int V> __device__ __forceinline__ void load_bools(const unsigned char* q, bool same, float (&v)[V]) {
  static_assert(V == 1 || V == 2 || V == 4, "vectors of 1, 2 or 4 elements");
  unsigned w = q[0];
  if (!same) {
    if constexpr (V == 2) w = *reinterpret_cast<const unsigned short*>(q);
    if constexpr (V == 4) w = *reinterpret_cast<const unsigned*>(q);
  }
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = (float)(same ? w : (w >> 8 * j) & 0xffu);
}

// V elements of slot s from element `off` of its row p (slot_at: typed), converted to floats:
// one vector, or one element repeated where `same` (a slot constant along the row).
template <class Op, int V>
__device__ __forceinline__ void load_elems(const float* p, int s, long long off, bool same, float (&v)[V]) {
  int kind = 0;
  if constexpr (Op::kTypedSlots) kind = Op::slot_kind(s);
  if (kind == 3) {
    load_bools<V>(reinterpret_cast<const unsigned char*>(p) + off, same, v);
  } else if (V == 1 || same) {
    const float f = kind ? half_to_float(reinterpret_cast<const unsigned short*>(p)[off], kind) : p[off];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = f;
  } else if (kind) {
    load_halves<V>(reinterpret_cast<const unsigned short*>(p) + off, kind, v);
  } else {
    load_vec<V>(p + off, v);
  }
}

// Stores V values as one vector of V halves at element `off` of a half slot's row p (the row's
// float32 slots: false, nothing stored).
template <class Op, int V>
__device__ __forceinline__ bool store_half(float* p, int s, long long off, const float (&v)[V]) {
  const int kind = Op::slot_kind(s);
  if (kind != 1 && kind != 2) return false;
  store_halves<V>(reinterpret_cast<unsigned short*>(p) + off, kind, v);
  return true;
}

template <class Op> struct Row {
  float* p[Op::kSlots];  // each slot's row (slot_at: typed)
  float red[Op::kReduced];

  Row() = default;
  __device__ __forceinline__ Row(const KernelArgs& a, long long o) {
#pragma unroll
    for (int s = 0; s < Op::kSlots; ++s) p[s] = slot_at<Op>(a.ptr[s], s, Op::row_offset(s, o));
  }

  // How elements [begin, ...) of this row move V at a time: -1 when they cannot, else the number
  // of elements before the first vector (every vector then lies in one run of stride 1 or 0 of
  // every slot, aligned). A row that is one run in every slot (Op::kOneRun) starts its vectors
  // where the stride-1 slots align, which they must do together; a row of several runs needs
  // begin a multiple of V (Op::kVec) and aligned rows.
  template <int V> __device__ __forceinline__ long long vector_head(long long begin) const {
    if (V == 1) return 0;
    long long phase = -1;
    bool ok = Op::kOneRun || (Op::kVec % V == 0 && begin % V == 0);
#pragma unroll
    for (int s = 0; s < Op::kSlots; ++s) {
      if (Op::inner_stride(s) != 1) continue;
      const long long ph = ((unsigned long long)p[s] / slot_bytes<Op>(s) + begin) % V;
      ok &= (unsigned long long)p[s] % slot_bytes<Op>(s) == 0 && (phase < 0 || ph == phase);
      phase = ph;
    }
    if (!ok || (!Op::kOneRun && phase > 0)) return -1;
    return phase <= 0 ? 0 : V - phase;
  }

  // Whether the whole row moves V at a time from its first element (the passes that keep element
  // order, or give each thread the same elements in every pass, need it).
  template <int V> __device__ __forceinline__ bool whole_vectors(long long k) const {
    return vector_head<V>(0) == 0 && k % V == 0;
  }

  // x[j][s] = element e + j of input slot s (V > 1 only from a vector_head on); Op::fill(s) where
  // the slot is not read (Op::in_range: a part of a cat), a vector across the range's edge
  // element by element.
  template <int V> __device__ __forceinline__ void load_slot(int s, long long e, float (&x)[V][Op::kIn]) const {
    if constexpr (Op::kRanged) {
      if (!Op::in_range(s, e) || !Op::in_range(s, e + V - 1)) {  // (a range is one run)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float one[1] = {Op::fill(s)};
          if (Op::in_range(s, e + j)) load_elems<Op, 1>(p[s], s, Op::elem_offset(s, e + j), true, one);
          x[j][s] = one[0];
        }
        return;
      }
    }
    float v[V];
    load_elems<Op, V>(p[s], s, Op::elem_offset(s, e), Op::inner_stride(s) == 0, v);
#pragma unroll
    for (int j = 0; j < V; ++j) x[j][s] = v[j];
  }

  template <int V> __device__ __forceinline__ void load(const KernelArgs& a, long long e, float (&x)[V][Op::kIn]) const {
    (void)a;
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) load_slot<V>(s, e, x);
  }

  // x[u] = the V elements at e0 + u * BLOCK * V, for those before `end` (ILP loads in flight).
  template <int BLOCK, int ILP, int V>
  __device__ __forceinline__ void load_chunk(const KernelArgs& a, long long e0, long long end,
                                             float (&x)[ILP][V][Op::kIn]) const {
#pragma unroll
    for (int u = 0; u < ILP; ++u) {
      const long long e = e0 + (long long)u * BLOCK * V;
      if (e < end) load<V>(a, e, x[u]);
    }
  }

  // Computes and stores the Full outputs of elements e .. e + V - 1, given the scans there.
  template <int V, int MATH>
  __device__ __forceinline__ void store(const KernelArgs& a, long long e, const float (&x)[V][Op::kIn],
                                        const float (&sc)[V][kScanSlots<Op>]) {
    float y[Op::kFullOut > 0 ? Op::kFullOut : 1][V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float yj[Op::kFullOut > 0 ? Op::kFullOut : 1];
      Op::template out<MATH>(x[j], red, sc[j], yj);
#pragma unroll
      for (int o = 0; o < Op::kFullOut; ++o) y[o][j] = yj[o];
    }
#pragma unroll
    for (int o = 0; o < Op::kFullOut; ++o) {
      if constexpr (Op::kTypedSlots) {
        const int s = Op::full_out_slot(o);
        if (store_half<Op, V>(p[s], s, Op::elem_offset(s, e), y[o])) continue;
      }
      float* q = p[Op::full_out_slot(o)] + Op::elem_offset(Op::full_out_slot(o), e);
      if (V == 1) *q = y[o][0];
      else store_vec<V>(q, y[o]);
    }
  }
};

// ---- reduce_kernel: a block per row.

// Every lane of the warp ends with the merge of the warp's 32 partial statistics.
template <class Op, int P, int MATH>
__device__ __forceinline__ void warp_merge(float* acc) {
#pragma unroll
  for (int sh = 16; sh > 0; sh >>= 1) {
    float other[Op::kStats];
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i) other[i] = __shfl_xor_sync(0xffffffffu, acc[i], sh);
    merge<Op, P, MATH>(acc, other);
  }
}

template <class Op, int P, int MATH, int BLOCK>
__device__ __forceinline__ void block_merge(float* acc, float (*partial)[32]) {
  warp_merge<Op, P, MATH>(acc);
  if (BLOCK > 32) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < Op::kStats; ++i) partial[i][warp] = acc[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i) acc[i] = lane < BLOCK / 32 ? partial[i][lane] : stat_identity<Op>(i);
    warp_merge<Op, P, MATH>(acc);
    __syncthreads();  // partial is reused by the next pass
  }
}

// Folds the values of pass P at elements e .. e + n - 1 (x[j]: element e + j's inputs).
template <class Op, int P, int MATH, int V>
__device__ __forceinline__ void fold_elements(float* acc, const float (&x)[V][Op::kIn], const float* red, long long e,
                                              long long n = V) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (j >= n) continue;
    float v[Op::kStats];
    Op::template values<P, MATH>(x[j], red, v);
    fold<Op, P, MATH>(acc, v, e + j);
  }
}

// Whether pass P folds a chunk of elements as one partial (fold_chunk): it has an online
// exp-sum and no arg statistic (those need each element's index).
template <class Op, int P> __host__ __device__ constexpr bool folds_chunks() {
  bool expsum = false;
  for (int i = 0; i < Op::kStats; ++i) {
    if (Op::stat_pass(i) != P) continue;
    if (is_arg_stat(Op::stat_kind(i))) return false;
    expsum = expsum || Op::stat_kind(i) == kStatExpSum;
  }
  return expsum;
}

// Folds N elements (x[j]: element j's inputs) into acc as one partial: each exp-sum takes its
// exponentials against the chunk's maximum, and merge rescales the chunk's sum once (one
// exponential per element plus one per chunk, instead of an exponential and a rescale per
// element). A chunk whose maximum is infinite or NaN takes them as exp_rescale does.
template <class Op, int P, int MATH, int N>
__device__ __forceinline__ void fold_chunk(float* acc, const float (&x)[N][Op::kIn], const float* red) {
  float v[N][Op::kStats], c[Op::kStats];
  init_stats<Op>(c);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    Op::template values<P, MATH>(x[j], red, v[j]);
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i)
      if (Op::stat_pass(i) == P && is_plain_stat(Op::stat_kind(i))) c[i] = combine_plain(Op::stat_kind(i), c[i], v[j][i]);
  }
#pragma unroll
  for (int i = 0; i < Op::kStats; ++i) {
    if (Op::stat_pass(i) != P || Op::stat_kind(i) != kStatExpSum) continue;
    const int p = Op::stat_partner(i);
    const float m = c[p];
    float sum = 0.f;
    if (fabsf(m) < __int_as_float(0x7f800000)) {
#pragma unroll
      for (int j = 0; j < N; ++j) sum += exp_<MATH>(v[j][p] - m);
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) sum += exp_rescale<MATH>(v[j][p], m);
    }
    c[i] = sum;
  }
  merge<Op, P, MATH>(acc, c);
}

// This thread's share of pass P over elements [begin, end) of a row, V per load (where the
// vectors lie: see Row::vector_head).
template <class Op, int P, int MATH, int BLOCK, int ILP, int V>
__device__ __forceinline__ void fold_range(const KernelArgs& a, const Row<Op>& row, long long begin, long long end,
                                           float* acc) {
  for (long long e0 = begin + (long long)threadIdx.x * V; e0 < end; e0 += (long long)BLOCK * V * ILP) {
    float x[ILP][V][Op::kIn];
    row.template load_chunk<BLOCK, ILP, V>(a, e0, end, x);
    if constexpr (ILP * V > 1 && folds_chunks<Op, P>()) {
      if (e0 + (long long)(ILP - 1) * BLOCK * V + V <= end) {  // every element present
        fold_chunk<Op, P, MATH, ILP * V>(acc, reinterpret_cast<const float(&)[ILP * V][Op::kIn]>(x), row.red);
        continue;
      }
    }
#pragma unroll
    for (int u = 0; u < ILP; ++u) {
      const long long e = e0 + (long long)u * BLOCK * V;
      fold_elements<Op, P, MATH, V>(acc, x[u], row.red, e, end - e);
    }
  }
}

// Pass P over elements [begin, end): whole vectors where the row allows, single elements before
// and after them (fewer than V each), every element alone where it does not.
template <class Op, int P, int MATH, int BLOCK, int ILP, int V>
__device__ __forceinline__ void block_fold(const KernelArgs& a, const Row<Op>& row, long long begin, long long end,
                                           float* acc) {
  const long long head = row.template vector_head<V>(begin);
  if (V == 1 || head < 0 || head >= end - begin) {
    fold_range<Op, P, MATH, BLOCK, ILP, 1>(a, row, begin, end, acc);
    return;
  }
  const long long body = begin + head, body_end = body + (end - body) / V * V;
  fold_range<Op, P, MATH, BLOCK, ILP, V>(a, row, body, body_end, acc);
  fold_range<Op, P, MATH, BLOCK, 1, 1>(a, row, begin, body, acc);
  fold_range<Op, P, MATH, BLOCK, 1, 1>(a, row, body_end, end, acc);
}

// The final pass over a row: every Full output, the scans carried from chunk to chunk in
// element order (u, then thread, then j). Every thread runs the same iterations (the scans meet
// at barriers).
template <class Op, int MATH, int BLOCK, int ILP, int V>
__device__ __forceinline__ void block_store(const KernelArgs& a, Row<Op>& row, float (*warp_totals)[32]) {
  const long long n = a.k;
  constexpr int S = kScanSlots<Op>;
  float carry[S];
#pragma unroll
  for (int i = 0; i < S; ++i) carry[i] = scan_identity<Op>(i);
  for (long long base = 0; base < n; base += (long long)BLOCK * V * ILP) {
    const long long e0 = base + (long long)threadIdx.x * V;
    float x[ILP][V][Op::kIn];
    row.template load_chunk<BLOCK, ILP, V>(a, e0, n, x);
#pragma unroll
    for (int u = 0; u < ILP; ++u) {
      const long long e = e0 + (long long)u * BLOCK * V;
      float sc[V][S];
      if (Op::kScans > 0) {
#pragma unroll
        for (int j = 0; j < V; ++j) scan_inputs<Op, MATH>(x[u][j], row.red, e + j < n, sc[j]);
#pragma unroll
        for (int j = 1; j < V; ++j)
#pragma unroll
          for (int i = 0; i < S; ++i) sc[j][i] = scan_combine<Op>(i, sc[j - 1][i], sc[j][i]);
        float before[S], total[S];
#pragma unroll
        for (int i = 0; i < S; ++i) before[i] = sc[V - 1][i];
        block_exclusive_scan<Op, BLOCK>(before, total, warp_totals);
#pragma unroll
        for (int i = 0; i < S; ++i) {
          const float offset = scan_combine<Op>(i, carry[i], before[i]);
#pragma unroll
          for (int j = 0; j < V; ++j) sc[j][i] = scan_combine<Op>(i, offset, sc[j][i]);
          carry[i] = scan_combine<Op>(i, carry[i], total[i]);
        }
      }
      if (e < n) row.template store<V, MATH>(a, e, x[u], sc);
    }
  }
}

template <class Op, int P, int MATH, int BLOCK, int ILP, int VEC>
__device__ __forceinline__ void block_passes(const KernelArgs& a, Row<Op>& row, float (*partial)[32]) {
  if constexpr (P < Op::kPasses) {
    float acc[Op::kStats > 0 ? Op::kStats : 1];
    init_stats<Op>(acc);
    block_fold<Op, P, MATH, BLOCK, ILP, VEC>(a, row, 0, a.k, acc);
    block_merge<Op, P, MATH, BLOCK>(acc, partial);
    Op::template after<P, MATH>(a, row.p, acc, row.red);
    block_passes<Op, P + 1, MATH, BLOCK, ILP, VEC>(a, row, partial);
  }
}

template <int BLOCK, int ILP, int VEC, int MATH, class Op>
__global__ void __launch_bounds__(BLOCK) reduce_kernel(const KernelArgs a) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is a multiple of 32, at most 1024");
  __shared__ float partial[Op::kStats > 0 ? Op::kStats : 1][32];
  __shared__ float warp_totals[kScanSlots<Op>][32];
  for (long long o = blockIdx.x; o < a.numel; o += gridDim.x) {
    Row<Op> row(a, o);
    // The output pass moves whole vectors only (its scans run in element order).
    const bool vec = row.template whole_vectors<VEC>(a.k);
    block_passes<Op, 0, MATH, BLOCK, ILP, VEC>(a, row, partial);
    if (threadIdx.x == 0) Op::store_reduced(a, o, row.p, row.red);
    if (Op::kFullOut > 0) {
      if (vec) block_store<Op, MATH, BLOCK, ILP, VEC>(a, row, warp_totals);
      else block_store<Op, MATH, BLOCK, ILP, 1>(a, row, warp_totals);
    }
  }
}

// ---- reduce_split_kernel: CHUNKS blocks per row, for groups with few rows (a loss over a whole
// tensor is one row). Single-pass groups without per-element outputs only. Each block folds its
// chunk of the row and writes its statistics to the workspace; the last block of a row (counted
// atomically) merges them, finishes the row and sets the row's counter back to 0.
// Workspace (zeroed when allocated, a.ptr[slots + 1]): the statistics of rows x kMaxChunks blocks,
// then one counter per row.

template <int BLOCK, int ILP, int VEC, int CHUNKS, int MATH, class Op>
__global__ void __launch_bounds__(BLOCK) reduce_split_kernel(const KernelArgs a) {
  static_assert(Op::kPasses == 1 && Op::kFullOut == 0, "one pass, no per-element outputs");
  static_assert(CHUNKS <= kMaxChunks, "at most kMaxChunks blocks per row");
  __shared__ float partial[Op::kStats][32];
  __shared__ bool last;
  float* stats = a.ptr[Op::kSlots + 1];
  unsigned* counters = reinterpret_cast<unsigned*>(stats + a.numel * kMaxChunks * Op::kStats);
  const long long per = (a.k + CHUNKS - 1) / CHUNKS, chunk = (per + VEC - 1) / VEC * VEC;
  for (long long b = blockIdx.x; b < a.numel * CHUNKS; b += gridDim.x) {
    const long long o = b / CHUNKS;
    const int c = (int)(b % CHUNKS);
    Row<Op> row(a, o);
    const long long begin = c * chunk, end = begin + chunk < a.k ? begin + chunk : a.k;
    float acc[Op::kStats];
    init_stats<Op>(acc);
    block_fold<Op, 0, MATH, BLOCK, ILP, VEC>(a, row, begin, end, acc);
    block_merge<Op, 0, MATH, BLOCK>(acc, partial);
    float* mine = stats + (o * kMaxChunks + c) * Op::kStats;
    if (threadIdx.x == 0) {
#pragma unroll
      for (int i = 0; i < Op::kStats; ++i) mine[i] = acc[i];
      __threadfence();
      last = atomicAdd(&counters[o], 1u) == CHUNKS - 1;
    }
    __syncthreads();
    const bool is_last = last;
    __syncthreads();  // `last` is written again by the next chunk
    if (!is_last) continue;  // uniform across the block
    __threadfence();
    init_stats<Op>(acc);
    for (int t = threadIdx.x; t < CHUNKS; t += BLOCK) {
      float other[Op::kStats];
#pragma unroll
      for (int i = 0; i < Op::kStats; ++i) other[i] = __ldcg(stats + (o * kMaxChunks + t) * Op::kStats + i);
      merge<Op, 0, MATH>(acc, other);
    }
    block_merge<Op, 0, MATH, BLOCK>(acc, partial);
    Op::template after<0, MATH>(a, row.p, acc, row.red);
    if (threadIdx.x == 0) {
      Op::store_reduced(a, o, row.p, row.red);
      counters[o] = 0;
    }
  }
}

// ---- reduce_thread_kernel: ROWS x RVEC neighbouring rows per block, SPLIT threads per RVEC rows.

// The R neighbouring rows o .. o + R - 1 of one thread (o a multiple of R, R dividing
// Op::kRowVec): element e of all of them is one vector of R in every slot whose rows are
// neighbours in memory (Op::row_stride 1) and one value in every slot they share (0), where
// the pointers are aligned; elsewhere each row's element moves alone.
template <class Op, int R> struct Rows {
  Row<Op> row[R];
  bool vec = R > 1;

  __device__ __forceinline__ Rows(const KernelArgs& a, long long o) {
#pragma unroll
    for (int j = 0; j < R; ++j) row[j] = Row<Op>(a, o + j);
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s)
      if (Op::row_stride(s) == 1) vec &= aligned(row[0].p[s], s);
#pragma unroll
    for (int o = 0; o < Op::kFullOut; ++o) vec &= aligned(row[0].p[Op::full_out_slot(o)], Op::full_out_slot(o));
  }

  static __device__ __forceinline__ bool aligned(const float* p, int s) {
    return (unsigned long long)p % (R * slot_bytes<Op>(s)) == 0;
  }

  // x[j][s] = element e of row j in input slot s (Op::fill(s) outside its range).
  __device__ __forceinline__ void load_slot(int s, long long e, float (&x)[R][Op::kIn]) const {
    if constexpr (Op::kRanged) {
      if (!Op::in_range(s, e)) {
#pragma unroll
        for (int j = 0; j < R; ++j) x[j][s] = Op::fill(s);
        return;
      }
    }
    const long long off = Op::elem_offset(s, e);
    if (vec && (Op::row_stride(s) == 1 || Op::row_stride(s) == 0)) {
      float v[R];
      load_elems<Op, R>(row[0].p[s], s, off, Op::row_stride(s) == 0, v);
#pragma unroll
      for (int j = 0; j < R; ++j) x[j][s] = v[j];
    } else {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        float v[1];
        load_elems<Op, 1>(row[j].p[s], s, off, true, v);
        x[j][s] = v[0];
      }
    }
  }

  __device__ __forceinline__ void load(long long e, float (&x)[R][Op::kIn]) const {
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) load_slot(s, e, x);
  }

  // Computes and stores the Full outputs of element e of every row, given the scans there.
  template <int MATH>
  __device__ __forceinline__ void store(long long e, const float (&x)[R][Op::kIn], const float (&sc)[R][kScanSlots<Op>]) {
    float y[Op::kFullOut > 0 ? Op::kFullOut : 1][R];
#pragma unroll
    for (int j = 0; j < R; ++j) {
      float yj[Op::kFullOut > 0 ? Op::kFullOut : 1];
      Op::template out<MATH>(x[j], row[j].red, sc[j], yj);
#pragma unroll
      for (int o = 0; o < Op::kFullOut; ++o) y[o][j] = yj[o];
    }
#pragma unroll
    for (int o = 0; o < Op::kFullOut; ++o) {
      const int s = Op::full_out_slot(o);
      const long long off = Op::elem_offset(s, e);
      if (vec) {
        if constexpr (Op::kTypedSlots)
          if (store_half<Op, R>(row[0].p[s], s, off, y[o])) continue;
        store_vec<R>(row[0].p[s] + off, y[o]);
      } else {
#pragma unroll
        for (int j = 0; j < R; ++j) {
          if constexpr (Op::kTypedSlots) {
            const float one[1] = {y[o][j]};
            if (store_half<Op, 1>(row[j].p[s], s, off, one)) continue;
          }
          row[j].p[s][off] = y[o][j];
        }
      }
    }
  }

  // Folds the values of pass P at element e of every row (x as from load) into acc[row].
  template <int P, int MATH>
  __device__ __forceinline__ void fold_all(float (*acc)[Op::kStats], const float (&x)[R][Op::kIn], long long e) const {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      float v[Op::kStats];
      Op::template values<P, MATH>(x[j], row[j].red, v);
      fold<Op, P, MATH>(acc[j], v, e);
    }
  }
};

// Shared memory of split_merge: the statistics of every thread's R rows.
template <class Op, int ROWS, int SPLIT, int R>
using SplitPartial = float[R][Op::kStats > 0 ? Op::kStats : 1][SPLIT][ROWS];

// Merges the statistics of the SPLIT threads sharing each of the R rows (threadIdx.y) through
// shared memory, all R rows in one round; every thread ends with its rows' totals.
template <class Op, int P, int MATH, int ROWS, int SPLIT, int R>
__device__ __forceinline__ void split_merge(float (*acc)[Op::kStats > 0 ? Op::kStats : 1],
                                            SplitPartial<Op, ROWS, SPLIT, R>& partial) {
  if (SPLIT == 1) return;
#pragma unroll
  for (int j = 0; j < R; ++j)
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i) partial[j][i][threadIdx.y][threadIdx.x] = acc[j][i];
  __syncthreads();
#pragma unroll
  for (int j = 0; j < R; ++j) {
    init_stats<Op>(acc[j]);
#pragma unroll
    for (int t = 0; t < SPLIT; ++t) {
      float other[Op::kStats];
#pragma unroll
      for (int i = 0; i < Op::kStats; ++i) other[i] = partial[j][i][t][threadIdx.x];
      merge<Op, P, MATH>(acc[j], other);
    }
  }
  __syncthreads();  // partial is reused by the next pass
}

// Calls f(c, e) for each of this thread's CACHE cached elements inside the row, e = threadIdx.y +
// c * SPLIT its index: without a test per element where all of them are (a test per element
// made a whole row of 96 elements in two rows spill).
template <int SPLIT, int CACHE, class F>
__device__ __forceinline__ void for_cached(long long k, F&& f) {
  const long long ty = SPLIT == 1 ? 0 : threadIdx.y;
  if (ty + (long long)(CACHE - 1) * SPLIT < k) {
#pragma unroll
    for (int c = 0; c < CACHE; ++c) f(c, ty + (long long)c * SPLIT);
  } else {
#pragma unroll
    for (int c = 0; c < CACHE; ++c)
      if (ty + (long long)c * SPLIT < k) f(c, ty + (long long)c * SPLIT);
  }
}

// This thread's elements of its rows are e = threadIdx.y + j * SPLIT; the first CACHE of them
// are loaded once, in pass 0, and kept in registers for the later passes and the output pass.
template <class Op, int P, int MATH, int ROWS, int SPLIT, int CACHE, int R>
__device__ __forceinline__ void split_passes(const KernelArgs& a, Rows<Op, R>& rows, bool valid,
                                             float (&cache)[CACHE > 0 ? CACHE : 1][R][Op::kIn],
                                             SplitPartial<Op, ROWS, SPLIT, R>& partial) {
  if constexpr (P < Op::kPasses) {
    float acc[R][Op::kStats > 0 ? Op::kStats : 1];
#pragma unroll
    for (int j = 0; j < R; ++j) init_stats<Op>(acc[j]);
    if (valid) {
      if (P == 0) for_cached<SPLIT, CACHE>(a.k, [&](int c, long long e) { rows.load(e, cache[c]); });
      for_cached<SPLIT, CACHE>(a.k, [&](int c, long long e) { rows.template fold_all<P, MATH>(acc, cache[c], e); });
#pragma unroll 4
      for (long long e = threadIdx.y + (long long)CACHE * SPLIT; e < a.k; e += SPLIT) {
        float x[R][Op::kIn];
        rows.load(e, x);
        rows.template fold_all<P, MATH>(acc, x, e);
      }
    }
    split_merge<Op, P, MATH, ROWS, SPLIT, R>(acc, partial);
#pragma unroll
    for (int j = 0; j < R; ++j) Op::template after<P, MATH>(a, rows.row[j].p, acc[j], rows.row[j].red);
    split_passes<Op, P + 1, MATH, ROWS, SPLIT, CACHE, R>(a, rows, valid, cache, partial);
  }
}

// reduce_thread_kernel's CACHE: the CACHE first elements of each thread's share of its rows, or
// with KEEP the whole share (k elements split over SPLIT threads).
__host__ __device__ constexpr int thread_cache(int keep, int cache, long long k, int split) {
  return keep ? (int)((k + split - 1) / split) : cache;
}

template <int ROWS, int SPLIT, int CACHE, int RVEC, int MATH, class Op>
__global__ void __launch_bounds__(ROWS * SPLIT) reduce_thread_kernel(const KernelArgs a) {
  static_assert(ROWS * SPLIT <= 1024, "at most 1024 threads");
  static_assert(Op::kRowVec % RVEC == 0, "RVEC neighbouring rows must move as vectors (Op::kRowVec)");
  constexpr int S = kScanSlots<Op>;
  __shared__ SplitPartial<Op, ROWS, SPLIT, RVEC> partial;
  for (long long base = (long long)blockIdx.x * ROWS * RVEC; base < a.numel; base += (long long)gridDim.x * ROWS * RVEC) {
    const long long o = base + (long long)threadIdx.x * RVEC;
    const bool valid = o < a.numel;  // a.numel is a multiple of RVEC
    Rows<Op, RVEC> rows(a, valid ? o : 0);
    float cache[CACHE > 0 ? CACHE : 1][RVEC][Op::kIn];
    split_passes<Op, 0, MATH, ROWS, SPLIT, CACHE, RVEC>(a, rows, valid, cache, partial);
    if (!valid) continue;  // no barrier follows in this iteration
    if (threadIdx.y == 0)
#pragma unroll
      for (int j = 0; j < RVEC; ++j) Op::store_reduced(a, o + j, rows.row[j].p, rows.row[j].red);
    if (Op::kFullOut == 0) continue;
    float sc[RVEC][S];
    if (Op::kScans > 0) {  // in element order: the first of the rows' threads alone
      if (threadIdx.y != 0) continue;
#pragma unroll
      for (int j = 0; j < RVEC; ++j)
#pragma unroll
        for (int i = 0; i < S; ++i) sc[j][i] = scan_identity<Op>(i);
      for (long long e = 0; e < a.k; ++e) {
        float x[RVEC][Op::kIn];
        rows.load(e, x);
#pragma unroll
        for (int j = 0; j < RVEC; ++j) {
          float sv[S];
          scan_inputs<Op, MATH>(x[j], rows.row[j].red, true, sv);
#pragma unroll
          for (int i = 0; i < S; ++i) sc[j][i] = scan_combine<Op>(i, sc[j][i], sv[i]);
        }
        rows.template store<MATH>(e, x, sc);
      }
      continue;
    }
    for_cached<SPLIT, CACHE>(a.k, [&](int c, long long e) { rows.template store<MATH>(e, cache[c], sc); });
#pragma unroll 4
    for (long long e = threadIdx.y + (long long)CACHE * SPLIT; e < a.k; e += SPLIT) {
      float x[RVEC][Op::kIn];
      rows.load(e, x);
      rows.template store<MATH>(e, x, sc);
    }
  }
}

// ---- reduce_cluster_kernel (sm_90): the CLUSTER blocks of a thread-block cluster share a row,
// each keeping its part in registers (CACHE vectors of VEC per thread; registers capped so that
// MINB blocks fit an SM) so that the row is read from memory once whatever the number of passes
// (a softmax or a norm over rows too long for one SM); after every pass the blocks exchange their
// statistics through distributed shared memory. Elements beyond CLUSTER x BLOCK x CACHE x VEC are
// read again in each pass. No scans.

// Merges the block statistics acc of the CLUSTER blocks, in rank order in every block so that
// all of them get the same values. `mine` (this block's slot, alternating between calls) is read
// by the other blocks until the next call's barrier; `merged` hands thread 0's result to the block.
template <class Op, int P, int MATH, int CLUSTER>
__device__ __forceinline__ void cluster_merge(float* acc, float* mine, float* merged) {
  if (threadIdx.x == 0)
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i) mine[i] = acc[i];
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
  if (threadIdx.x == 0) {
    float total[Op::kStats], other[CLUSTER][Op::kStats];
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      const float* theirs = static_cast<const float*>(__cluster_map_shared_rank(mine, r));
#pragma unroll
      for (int i = 0; i < Op::kStats; ++i) other[r][i] = theirs[i];
    }
    init_stats<Op>(total);
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) merge<Op, P, MATH>(total, other[r]);
#pragma unroll
    for (int i = 0; i < Op::kStats; ++i) merged[i] = total[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < Op::kStats; ++i) acc[i] = merged[i];
}

// The end of pass P over a row shared by a cluster: the block's statistics, then the cluster's
// (every block the same), then the row's values after the pass.
template <class Op, int P, int MATH, int CLUSTER, int BLOCK>
__device__ __forceinline__ void end_cluster_pass(const KernelArgs& a, Row<Op>& row, float* acc, float (*partial)[32],
                                                 float (*exchange)[Op::kStats], float* merged, int& phase) {
  block_merge<Op, P, MATH, BLOCK>(acc, partial);
  cluster_merge<Op, P, MATH, CLUSTER>(acc, exchange[phase & 1], merged);
  ++phase;
  Op::template after<P, MATH>(a, row.p, acc, row.red);
}

// Block `rank`'s part [begin, end) of a row of k elements shared by CLUSTER blocks (V-aligned).
template <int CLUSTER, int V> __device__ __forceinline__ void cluster_range(long long k, int rank, long long& begin, long long& end) {
  const long long per = (k + CLUSTER - 1) / CLUSTER, chunk = (per + V - 1) / V * V;
  begin = rank * chunk < k ? rank * chunk : k;
  end = begin + chunk < k ? begin + chunk : k;
}

template <class Op, int CLUSTER, int BLOCK, int CACHE, int V> struct ClusterPart {
  long long begin, end;  // this block's elements of the row: a multiple of V apart
  float cache[CACHE][V][Op::kIn];

  __device__ __forceinline__ long long cached(int j) const { return begin + ((long long)j * BLOCK + threadIdx.x) * V; }
  __device__ __forceinline__ long long first_uncached() const { return cached(CACHE); }
};

template <class Op, int P, int MATH, int CLUSTER, int BLOCK, int CACHE, int V>
__device__ __forceinline__ void cluster_passes(const KernelArgs& a, Row<Op>& row, ClusterPart<Op, CLUSTER, BLOCK, CACHE, V>& part,
                                               float (*partial)[32], float (*exchange)[Op::kStats], float* merged, int& phase) {
  if constexpr (P < Op::kPasses) {
    float acc[Op::kStats];
    init_stats<Op>(acc);
#pragma unroll
    for (int j = 0; j < CACHE; ++j) {
      const long long e = part.cached(j);
      if (e >= part.end) continue;
#pragma unroll
      for (int s = 0; s < Op::kIn; ++s)  // values that change along the row are kept, the others read again
        if (P == 0 || Op::inner_stride(s) == 0) row.template load_slot<V>(s, e, part.cache[j]);
      fold_elements<Op, P, MATH, V>(acc, part.cache[j], row.red, e);
    }
    for (long long e = part.first_uncached(); e < part.end; e += (long long)BLOCK * V) {
      float x[V][Op::kIn];
      row.template load<V>(a, e, x);
      fold_elements<Op, P, MATH, V>(acc, x, row.red, e);
    }
    end_cluster_pass<Op, P, MATH, CLUSTER, BLOCK>(a, row, acc, partial, exchange, merged, phase);
    cluster_passes<Op, P + 1, MATH, CLUSTER, BLOCK, CACHE, V>(a, row, part, partial, exchange, merged, phase);
  }
}

template <class Op, int MATH, int CLUSTER, int BLOCK, int CACHE, int V>
__device__ __forceinline__ void cluster_row(const KernelArgs& a, Row<Op>& row, int rank, float (*partial)[32],
                                            float (*exchange)[Op::kStats], float* merged, int& phase) {
  ClusterPart<Op, CLUSTER, BLOCK, CACHE, V> part;
  cluster_range<CLUSTER, V>(a.k, rank, part.begin, part.end);
  cluster_passes<Op, 0, MATH, CLUSTER, BLOCK, CACHE, V>(a, row, part, partial, exchange, merged, phase);
  if (Op::kFullOut == 0) return;
  float sc[V][1] = {};
#pragma unroll
  for (int j = 0; j < CACHE; ++j) {
    const long long e = part.cached(j);
    if (e >= part.end) continue;
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s)
      if (Op::inner_stride(s) == 0) row.template load_slot<V>(s, e, part.cache[j]);
    row.template store<V, MATH>(a, e, part.cache[j], sc);
  }
  for (long long e = part.first_uncached(); e < part.end; e += (long long)BLOCK * V) {
    float x[V][Op::kIn];
    row.template load<V>(a, e, x);
    row.template store<V, MATH>(a, e, x, sc);
  }
}

// The rows of a cluster, which all its blocks walk together: row_fn(row, rank, vec, partial,
// exchange, merged, phase) runs a row's passes and writes its per-element outputs (vec: whether
// the row moves in whole VEC-vectors); rank 0 stores the per-row ones. (A functor, not a lambda:
// NVRTC takes no unannotated lambdas.)
template <class Op, int CLUSTER, int BLOCK, int VEC, class RowFn>
__device__ __forceinline__ void cluster_rows(const KernelArgs& a, RowFn row_fn) {
  static_assert(Op::kScans == 0, "no scans");
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK is a multiple of 32, at most 1024");
  __shared__ float partial[Op::kStats][32];
  __shared__ float exchange[2][Op::kStats];
  __shared__ float merged[Op::kStats];
  const int rank = (int)__clusterRelativeBlockRank();
  int phase = 0;  // alternates the exchange slot from one cluster_merge to the next
  for (long long o = blockIdx.x / CLUSTER; o < a.numel; o += gridDim.x / CLUSTER) {
    Row<Op> row(a, o);
    row_fn(row, rank, row.template whole_vectors<VEC>(a.k), partial, exchange, merged, phase);
    if (rank == 0 && threadIdx.x == 0) Op::store_reduced(a, o, row.p, row.red);
  }
  // The other blocks may still read this block's exchange slot.
  __cluster_barrier_arrive();
  __cluster_barrier_wait();
}

template <class Op, int MATH, int CLUSTER, int BLOCK, int CACHE, int VEC> struct RegisterRow {
  const KernelArgs& a;
  __device__ __forceinline__ void operator()(Row<Op>& row, int rank, bool vec, float (*partial)[32],
                                             float (*exchange)[Op::kStats], float* merged, int& phase) const {
    if (vec)
      cluster_row<Op, MATH, CLUSTER, BLOCK, CACHE, VEC>(a, row, rank, partial, exchange, merged, phase);
    else  // rows that do not start aligned: correct, not fast (one element per thread kept)
      cluster_row<Op, MATH, CLUSTER, BLOCK, 1, 1>(a, row, rank, partial, exchange, merged, phase);
  }
};

template <int CLUSTER, int BLOCK, int MINB, int CACHE, int VEC, int MATH, class Op>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(BLOCK, MINB) reduce_cluster_kernel(const KernelArgs a) {
  cluster_rows<Op, CLUSTER, BLOCK, VEC>(a, RegisterRow<Op, MATH, CLUSTER, BLOCK, CACHE, VEC>{a});
}

// ---- reduce_cluster_smem_kernel (sm_90): as reduce_cluster_kernel, each block's part of the
// row kept in dynamic shared memory instead of registers, as much of it as the launch gives
// (the inputs that change along the row; per-row and per-run ones are read again): a block needs
// few registers, so that several clusters' rows are in flight on an SM. ILP vectors of VEC in
// flight per thread.

template <class Op> __host__ __device__ constexpr int varying_inputs() {
  int n = 0;
  for (int s = 0; s < Op::kIn; ++s) n += Op::inner_stride(s) != 0;
  return n;
}

// Where input slot s sits among the varying ones.
template <class Op> __host__ __device__ constexpr int varying_index(int s) {
  int n = 0;
  for (int i = 0; i < s; ++i) n += Op::inner_stride(i) != 0;
  return n;
}

template <class Op> struct SmemPart {
  long long begin, end;  // this block's elements of the row: a multiple of V apart
  long long kept;        // elements of each varying input that shared memory holds (a multiple of V)
  float* mem;            // [varying input][kept]

  __device__ __forceinline__ bool holds(long long e) const { return e - begin < kept; }
  __device__ __forceinline__ float* at(int s, long long e) const { return mem + varying_index<Op>(s) * kept + (e - begin); }
};

// x[u] = the V elements at e0 + u * BLOCK * V before part.end: from shared memory where it holds
// them after pass 0, else from the tensors (stored into shared memory in pass 0).
template <class Op, bool FIRST, int BLOCK, int ILP, int V>
__device__ __forceinline__ void smem_chunk(const Row<Op>& row, const SmemPart<Op>& part, long long e0,
                                           float (&x)[ILP][V][Op::kIn]) {
#pragma unroll
  for (int u = 0; u < ILP; ++u) {
    const long long e = e0 + (long long)u * BLOCK * V;
    if (e >= part.end) continue;
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) {
      if (!FIRST && Op::inner_stride(s) != 0 && part.holds(e)) {
        float v[V];
        load_vec<V>(part.at(s, e), v);
#pragma unroll
        for (int j = 0; j < V; ++j) x[u][j][s] = v[j];
      } else {
        row.template load_slot<V>(s, e, x[u]);
      }
    }
  }
  if (!FIRST) return;
#pragma unroll
  for (int u = 0; u < ILP; ++u) {
    const long long e = e0 + (long long)u * BLOCK * V;
    if (e >= part.end || !part.holds(e)) continue;
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) {
      if (Op::inner_stride(s) == 0) continue;
      float v[V];
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] = x[u][j][s];
      store_vec<V>(part.at(s, e), v);
    }
  }
}

template <class Op, int P, int MATH, int CLUSTER, int BLOCK, int ILP, int V>
__device__ __forceinline__ void smem_passes(const KernelArgs& a, Row<Op>& row, const SmemPart<Op>& part, float (*partial)[32],
                                            float (*exchange)[Op::kStats], float* merged, int& phase) {
  if constexpr (P < Op::kPasses) {
    float acc[Op::kStats];
    init_stats<Op>(acc);
    for (long long e0 = part.begin + (long long)threadIdx.x * V; e0 < part.end; e0 += (long long)BLOCK * V * ILP) {
      float x[ILP][V][Op::kIn];
      smem_chunk<Op, P == 0, BLOCK, ILP, V>(row, part, e0, x);
#pragma unroll
      for (int u = 0; u < ILP; ++u) {
        const long long e = e0 + (long long)u * BLOCK * V;
        if (e < part.end) fold_elements<Op, P, MATH, V>(acc, x[u], row.red, e);
      }
    }
    end_cluster_pass<Op, P, MATH, CLUSTER, BLOCK>(a, row, acc, partial, exchange, merged, phase);
    smem_passes<Op, P + 1, MATH, CLUSTER, BLOCK, ILP, V>(a, row, part, partial, exchange, merged, phase);
  }
}

template <class Op, int MATH, int CLUSTER, int BLOCK, int ILP, int V>
__device__ __forceinline__ void cluster_smem_row(const KernelArgs& a, Row<Op>& row, int rank, float* mem, long long capacity,
                                                 float (*partial)[32], float (*exchange)[Op::kStats], float* merged, int& phase) {
  SmemPart<Op> part;
  cluster_range<CLUSTER, V>(a.k, rank, part.begin, part.end);
  part.kept = capacity / V * V;
  part.mem = mem;
  smem_passes<Op, 0, MATH, CLUSTER, BLOCK, ILP, V>(a, row, part, partial, exchange, merged, phase);
  if (Op::kFullOut == 0) return;
  float sc[V][1] = {};
  for (long long e0 = part.begin + (long long)threadIdx.x * V; e0 < part.end; e0 += (long long)BLOCK * V * ILP) {
    float x[ILP][V][Op::kIn];
    smem_chunk<Op, Op::kPasses == 0, BLOCK, ILP, V>(row, part, e0, x);
#pragma unroll
    for (int u = 0; u < ILP; ++u) {
      const long long e = e0 + (long long)u * BLOCK * V;
      if (e < part.end) row.template store<V, MATH>(a, e, x[u], sc);
    }
  }
  // Each thread reads back only what it stored, unless the next row moves in other vectors and
  // so gives the elements to other threads.
  __syncthreads();
}

template <class Op, int MATH, int CLUSTER, int BLOCK, int ILP, int VEC> struct SmemRow {
  const KernelArgs& a;
  float* mem;
  long long capacity;  // floats of shared memory per varying input
  __device__ __forceinline__ void operator()(Row<Op>& row, int rank, bool vec, float (*partial)[32],
                                             float (*exchange)[Op::kStats], float* merged, int& phase) const {
    if (vec)
      cluster_smem_row<Op, MATH, CLUSTER, BLOCK, ILP, VEC>(a, row, rank, mem, capacity, partial, exchange, merged, phase);
    else
      cluster_smem_row<Op, MATH, CLUSTER, BLOCK, ILP, 1>(a, row, rank, mem, capacity, partial, exchange, merged, phase);
  }
};

template <int CLUSTER, int BLOCK, int ILP, int VEC, int MATH, class Op>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(BLOCK) reduce_cluster_smem_kernel(const KernelArgs a) {
  extern __shared__ float4 row_mem[];
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  constexpr int kVarying = varying_inputs<Op>() > 0 ? varying_inputs<Op>() : 1;
  const long long capacity = (long long)(bytes / (sizeof(float) * kVarying));
  cluster_rows<Op, CLUSTER, BLOCK, VEC>(a, SmemRow<Op, MATH, CLUSTER, BLOCK, ILP, VEC>{a, reinterpret_cast<float*>(row_mem), capacity});
}

// ---- reduce_tile_kernel: the ROWS x RVEC neighbouring rows of a block kept whole in dynamic
// shared memory (their inputs that vary along the row), so that rows are read from memory once
// whatever the number of passes while each thread holds few registers and many blocks share an
// SM (norms over the channels of NCHW data: short rows whose neighbours are neighbours in
// memory). Thread (x, y) moves rows x * RVEC .. x * RVEC + RVEC - 1 of the block (as in
// reduce_thread_kernel), elements y, y + SPLIT, ...; it reads back only what it stored, so the
// tile needs no barrier. No scans.

// The tile: [varying input][element][ROWS x R], each thread's R rows side by side.
template <class Op, int ROWS, int R> struct Tile {
  float* mem;
  long long k;

  __device__ __forceinline__ float* at(int s, long long e) const {
    return mem + ((long long)varying_index<Op>(s) * k + e) * (ROWS * R) + threadIdx.x * R;
  }
  __device__ __forceinline__ void put(long long e, const float (&x)[R][Op::kIn]) const {
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) {
      if (Op::inner_stride(s) == 0) continue;
      float v[R];
#pragma unroll
      for (int j = 0; j < R; ++j) v[j] = x[j][s];
      store_vec<R>(at(s, e), v);
    }
  }
  // x as Rows::load gives it: the varying inputs from the tile, the others from memory.
  __device__ __forceinline__ void get(const Rows<Op, R>& rows, long long e, float (&x)[R][Op::kIn]) const {
#pragma unroll
    for (int s = 0; s < Op::kIn; ++s) {
      if (Op::inner_stride(s) == 0) {
        rows.load_slot(s, e, x);
        continue;
      }
      float v[R];
      load_vec<R>(at(s, e), v);
#pragma unroll
      for (int j = 0; j < R; ++j) x[j][s] = v[j];
    }
  }
};

template <class Op, int P, int MATH, int ROWS, int SPLIT, int R>
__device__ __forceinline__ void tile_passes(const KernelArgs& a, Rows<Op, R>& rows, const Tile<Op, ROWS, R>& tile,
                                            bool valid, SplitPartial<Op, ROWS, SPLIT, R>& partial) {
  if constexpr (P < Op::kPasses) {
    float acc[R][Op::kStats > 0 ? Op::kStats : 1];
#pragma unroll
    for (int j = 0; j < R; ++j) init_stats<Op>(acc[j]);
    if (valid) {
#pragma unroll 4
      for (long long e = threadIdx.y; e < a.k; e += SPLIT) {
        float x[R][Op::kIn];
        if (P == 0) {
          rows.load(e, x);
          tile.put(e, x);
        } else {
          tile.get(rows, e, x);
        }
        rows.template fold_all<P, MATH>(acc, x, e);
      }
    }
    split_merge<Op, P, MATH, ROWS, SPLIT, R>(acc, partial);
#pragma unroll
    for (int j = 0; j < R; ++j) Op::template after<P, MATH>(a, rows.row[j].p, acc[j], rows.row[j].red);
    tile_passes<Op, P + 1, MATH, ROWS, SPLIT, R>(a, rows, tile, valid, partial);
  }
}

template <int ROWS, int SPLIT, int RVEC, int MATH, class Op>
__global__ void __launch_bounds__(ROWS * SPLIT) reduce_tile_kernel(const KernelArgs a) {
  static_assert(ROWS * SPLIT <= 1024, "at most 1024 threads");
  static_assert(Op::kRowVec % RVEC == 0, "RVEC neighbouring rows must move as vectors (Op::kRowVec)");
  static_assert(Op::kScans == 0, "no scans");
  extern __shared__ float4 tile_mem[];
  __shared__ SplitPartial<Op, ROWS, SPLIT, RVEC> partial;
  const Tile<Op, ROWS, RVEC> tile{reinterpret_cast<float*>(tile_mem), a.k};
  for (long long base = (long long)blockIdx.x * ROWS * RVEC; base < a.numel; base += (long long)gridDim.x * ROWS * RVEC) {
    const long long o = base + (long long)threadIdx.x * RVEC;
    const bool valid = o < a.numel;  // a.numel is a multiple of RVEC
    Rows<Op, RVEC> rows(a, valid ? o : 0);
    tile_passes<Op, 0, MATH, ROWS, SPLIT, RVEC>(a, rows, tile, valid, partial);
    if (!valid) continue;  // no barrier follows in this iteration
    if (threadIdx.y == 0)
#pragma unroll
      for (int j = 0; j < RVEC; ++j) Op::store_reduced(a, o + j, rows.row[j].p, rows.row[j].red);
    if (Op::kFullOut == 0) continue;
    const float sc[RVEC][kScanSlots<Op>] = {};
#pragma unroll 4
    for (long long e = threadIdx.y; e < a.k; e += SPLIT) {
      float x[RVEC][Op::kIn];
      if (Op::kPasses == 0) rows.load(e, x);
      else tile.get(rows, e, x);
      rows.template store<MATH>(e, x, sc);
    }
  }
}

}  // namespace fusetune
