// Fused attention (FlashAttention-2's order) on tensor cores, with the group's elementwise
// epilogue fused: out = Op(softmax(scale * Q K^T, causal mask) V). Q is slot 0, K slot 1 and V
// slot 2, each a [batch, heads, seq, D] view read through its strides (KernelArgs; broadcast
// batches and heads have stride 0; K and V may have fewer heads than Q, each serving Q's in turn:
// grouped-query attention); m = Sq, n = Sk; the output is contiguous [batch, heads, Sq, D].
// Nothing of the scores goes to memory: each warp keeps 16 query rows' scores, running maximum
// and sum in registers, and rescales its output accumulators as later keys raise the maximum.
//
// Tuning parameters: WARPS warps of 16 query rows each (a block's BM = 16 * WARPS rows), BN keys
// per step (K and V tiles in dynamic shared memory, attention_launch.h). STAGES 1: each step
// loads its tiles, then computes; STAGES 2: the next step's tiles are copied asynchronously
// (cp.async) while this one computes, where K and V are rows of whole 16-byte vectors (else as
// STAGES 1). SPLIT 1: TF32 products (mma.sync m16n8k8, fp32 accumulators; the tiles rounded to
// TF32 as they are stored, or truncated by the tensor cores where copied asynchronously);
// SPLIT 3: 3xTF32 (each operand as its TF32 part plus the TF32 part of its remainder, three
// products per step), float32's accuracy.
// SCALE_BITS: the bits of the float scale * log2(e) (the softmax is taken in base 2).
// OUT_RANK 0: the float32 outputs are contiguous; 3 or 4: each is stored where its slot's
// strides over [batch x heads, Sq, D] or [batch, heads, Sq, D] place it (the heads merged back
// by a permutation the planner folds into the store).
#pragma once
#include "fusetune_args.h"
#include "gemm.cuh"  // store_epilogue

namespace fusetune {

__device__ __forceinline__ float attn_round_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

// c += a * b for one m16n8k8 TF32 tile; with SPLIT 3 the operands' remainders (a_lo, b_lo) add
// the two cross products first.
template <int SPLIT>
__device__ __forceinline__ void attn_mma(float (&c)[4], const float (&a)[4], const float (&a_lo)[4], const float (&b)[2],
                                         const float (&b_lo)[2]) {
#define FUSETUNE_ATTN_MMA(A, B)                                                                                     \
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "       \
               "{%0,%1,%2,%3};\n"                                                                                   \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                     \
               : "r"(__float_as_uint(A[0])), "r"(__float_as_uint(A[1])), "r"(__float_as_uint(A[2])),              \
                 "r"(__float_as_uint(A[3])), "r"(__float_as_uint(B[0])), "r"(__float_as_uint(B[1])))
  if constexpr (SPLIT == 3) {
    FUSETUNE_ATTN_MMA(a_lo, b);
    FUSETUNE_ATTN_MMA(a, b_lo);
  }
  FUSETUNE_ATTN_MMA(a, b);
#undef FUSETUNE_ATTN_MMA
}

// x as its TF32 part (hi) and, with SPLIT 3, the TF32 part of the rest (lo).
template <int SPLIT>
__device__ __forceinline__ void attn_split(float x, float& hi, float& lo) {
  hi = attn_round_tf32(x);
  if constexpr (SPLIT == 3) lo = attn_round_tf32(x - hi);
}

// Rows [r0, r0 + BN) of a [seq, D] matrix (element (r, d) at p[r * rs + d * ds]) into
// smem[BN][D + 4], rows past `rows` zero; TF32-rounded for SPLIT 1 (read as they are then).
template <int BN, int D, int THREADS, int SPLIT>
__device__ __forceinline__ void attn_load_tile(float* smem, const float* p, long long rs, long long ds, long long r0,
                                               long long rows, bool vec) {
  constexpr int LD = D + 4;
  if (vec) {  // ds == 1, rows of whole 16-byte vectors at 16-byte aligned addresses
#pragma unroll
    for (int e = threadIdx.x; e < BN * D / 4; e += THREADS) {
      const int r = e / (D / 4), d = (e % (D / 4)) * 4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r0 + r < rows) v = *reinterpret_cast<const float4*>(p + (r0 + r) * rs + d);
      if constexpr (SPLIT == 1) v = make_float4(attn_round_tf32(v.x), attn_round_tf32(v.y), attn_round_tf32(v.z), attn_round_tf32(v.w));
      *reinterpret_cast<float4*>(smem + r * LD + d) = v;
    }
    return;
  }
#pragma unroll 4
  for (int e = threadIdx.x; e < BN * D; e += THREADS) {
    const int r = e / D, d = e % D;
    const float v = r0 + r < rows ? p[(r0 + r) * rs + d * ds] : 0.f;
    smem[r * LD + d] = SPLIT == 1 ? attn_round_tf32(v) : v;
  }
}

// Rows [r0, r0 + BN) of a [seq, D] matrix with unit stride along D, rows of whole 16-byte
// vectors, into smem[BN][D + 4] by asynchronous copies (rows past `rows` zero-filled).
template <int BN, int D, int THREADS>
__device__ __forceinline__ void attn_copy_tile(float* smem, const float* p, long long rs, long long r0, long long rows) {
  constexpr int LD = D + 4;
#pragma unroll
  for (int e = threadIdx.x; e < BN * D / 4; e += THREADS) {
    const int r = e / (D / 4), d = (e % (D / 4)) * 4;
    const bool inside = r0 + r < rows;
    const float* src = inside ? p + (r0 + r) * rs + d : p;
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem + r * LD + d);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(inside ? 16 : 0));
  }
}

template <int WARPS, int BN, int D, int STAGES, int SPLIT, bool CAUSAL, unsigned SCALE_BITS, int OUT_RANK, class Op>
__global__ void __launch_bounds__(WARPS * 32) attention_kernel(const KernelArgs a) {
  static_assert(D % 8 == 0 && BN % 8 == 0, "D and BN are multiples of 8");
  static_assert(STAGES == 1 || STAGES == 2, "one or two stages");
  static_assert(OUT_RANK == 0 || OUT_RANK == 3 || OUT_RANK == 4, "contiguous outputs, or of rank 3 or 4");
  constexpr int THREADS = WARPS * 32, BM = 16 * WARPS, LD = D + 4, TILE = BN * LD;
  // LD = D + 4 keeps both fragment reads free of bank conflicts: K's (row g, column t) and V's
  // (rows 2t and 2t + 1, column g), for g < 8 and t < 4. Stage s holds K at s * 2 * TILE, V after it.
  extern __shared__ __align__(16) float attn_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long Sq = a.m, Sk = a.n, heads = a.size[0][1];
  const long long bh = blockIdx.y, bb = bh / heads, hh = bh % heads;
  const long long row0 = (long long)(gridDim.x - 1 - blockIdx.x) * BM;  // the longest causal rows start first
  const float* Q = a.ptr[0] + bb * a.stride[0][0] + hh * a.stride[0][1];
  const long long kh = hh / (heads / a.size[1][1]);  // grouped heads: each of K's and V's serves several of Q's
  const float* K = a.ptr[1] + bb * a.stride[1][0] + kh * a.stride[1][1];
  const float* V = a.ptr[2] + bb * a.stride[2][0] + kh * a.stride[2][1];
  const long long ks = a.stride[1][2], kd = a.stride[1][3], vs = a.stride[2][2], vd = a.stride[2][3];
  const bool k_vec = kd == 1 && ks % 4 == 0 && (reinterpret_cast<unsigned long long>(K) & 15) == 0;
  const bool v_vec = vd == 1 && vs % 4 == 0 && (reinterpret_cast<unsigned long long>(V) & 15) == 0;
  const long long r_lo = row0 + warp * 16 + g, r_hi = r_lo + 8;

  // This warp's Q rows as A fragments (a0: row g, column t; a1: row g + 8; a2, a3: column t + 4),
  // scaled by scale * log2(e).
  const float scale = __uint_as_float(SCALE_BITS), inf = __int_as_float(0x7f800000);
  float q[D / 8][4], q_lo[SPLIT == 3 ? D / 8 : 1][4];
#pragma unroll
  for (int kk = 0; kk < D / 8; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long r = i % 2 ? r_hi : r_lo;
      const int d = kk * 8 + t + (i / 2) * 4;
      const float x = r < Sq ? Q[r * a.stride[0][2] + d * a.stride[0][3]] * scale : 0.f;
      attn_split<SPLIT>(x, q[kk][i], q_lo[SPLIT == 3 ? kk : 0][i]);
    }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] = 0.f;
  float m_lo = -inf, m_hi = -inf, l_lo = 0.f, l_hi = 0.f;  // l: this thread's part of the row sums
  const long long keys = CAUSAL ? (Sk < row0 + BM ? Sk : row0 + BM) : Sk;
  const long long warp_last_row = row0 + warp * 16 + 15;
  const bool copy_async = STAGES == 2 && k_vec && v_vec;
  if (copy_async) {
    attn_copy_tile<BN, D, THREADS>(attn_smem, K, ks, 0, Sk);
    attn_copy_tile<BN, D, THREADS>(attn_smem + TILE, V, vs, 0, Sk);
    asm volatile("cp.async.commit_group;\n" ::);
  }

  for (long long k0 = 0, step = 0; k0 < keys; k0 += BN, ++step) {
    const float* Ks = attn_smem + (copy_async ? (step % 2) * 2 * TILE : 0);
    const float* Vs = Ks + TILE;
    if (copy_async) {  // the next step's tiles into the other stage (read two steps ago), this one's awaited
      if (k0 + BN < keys) {
        float* next = attn_smem + ((step + 1) % 2) * 2 * TILE;
        attn_copy_tile<BN, D, THREADS>(next, K, ks, k0 + BN, Sk);
        attn_copy_tile<BN, D, THREADS>(next + TILE, V, vs, k0 + BN, Sk);
      }
      asm volatile("cp.async.commit_group;\n" ::);
      asm volatile("cp.async.wait_group 1;\n" ::);
      __syncthreads();
    } else {
      __syncthreads();  // the previous tiles are read
      attn_load_tile<BN, D, THREADS, SPLIT>(attn_smem, K, ks, kd, k0, Sk, k_vec);
      attn_load_tile<BN, D, THREADS, SPLIT>(attn_smem + TILE, V, vs, vd, k0, Sk, v_vec);
      __syncthreads();
    }
    if (!(CAUSAL && k0 > warp_last_row)) {  // else every key of the tile is past this warp's rows
      // s = Q K^T for keys k0 + 8j + (2t, 2t + 1) in rows g (s[j][0], s[j][1]) and g + 8 (s[j][2], s[j][3]).
      float s[BN / 8][4];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) s[j][i] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 8; ++kk) {
          const float* kp = Ks + (j * 8 + g) * LD + kk * 8 + t;
          float b[2], b_lo[2];
          if constexpr (SPLIT == 3) {
            attn_split<3>(kp[0], b[0], b_lo[0]);
            attn_split<3>(kp[4], b[1], b_lo[1]);
          } else {
            b[0] = kp[0];
            b[1] = kp[4];
          }
          attn_mma<SPLIT>(s[j], q[kk], q_lo[SPLIT == 3 ? kk : 0], b, b_lo);
        }
      }
      if (k0 + BN > Sk || (CAUSAL && k0 + BN - 1 > row0 + warp * 16)) {  // keys past the end or the diagonal
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const long long col = k0 + j * 8 + 2 * t + i % 2, row = i < 2 ? r_lo : r_hi;
            if (col >= Sk || (CAUSAL && col > row)) s[j][i] = -inf;
          }
      }

      // Online softmax: the rows' new maxima (over the quad of threads sharing a row), the old
      // sums and outputs rescaled, p = 2^(s - max).
      float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[j][0], s[j][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[j][2], s[j][3]));
      }
#pragma unroll
      for (int x = 1; x < 4; x *= 2) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, x));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, x));
      }
      const float base_lo = mx_lo == -inf ? 0.f : mx_lo, base_hi = mx_hi == -inf ? 0.f : mx_hi;
      const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
      m_lo = mx_lo;
      m_hi = mx_hi;
      l_lo *= alpha_lo;
      l_hi *= alpha_hi;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= alpha_lo;
        o[n][1] *= alpha_lo;
        o[n][2] *= alpha_hi;
        o[n][3] *= alpha_hi;
      }
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[j][0] = exp2f(s[j][0] - base_lo);
        s[j][1] = exp2f(s[j][1] - base_lo);
        s[j][2] = exp2f(s[j][2] - base_hi);
        s[j][3] = exp2f(s[j][3] - base_hi);
        l_lo += s[j][0] + s[j][1];
        l_hi += s[j][2] + s[j][3];
      }

      // o += P V. P's accumulator fragment is an A fragment as it is once block j's 8 keys are
      // reordered: A's column t is key 2t and column t + 4 key 2t + 1, so V's fragment reads rows
      // 2t and 2t + 1 (the sum over keys does not depend on their order).
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        float p[4], p_lo[4];
        attn_split<SPLIT>(s[j][0], p[0], p_lo[0]);
        attn_split<SPLIT>(s[j][2], p[1], p_lo[1]);
        attn_split<SPLIT>(s[j][1], p[2], p_lo[2]);
        attn_split<SPLIT>(s[j][3], p[3], p_lo[3]);
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          const float* vp = Vs + (j * 8 + 2 * t) * LD + n * 8 + g;
          float b[2], b_lo[2];
          if constexpr (SPLIT == 3) {
            attn_split<3>(vp[0], b[0], b_lo[0]);
            attn_split<3>(vp[LD], b[1], b_lo[1]);
          } else {
            b[0] = vp[0];
            b[1] = vp[LD];
          }
          attn_mma<SPLIT>(o[n], p, p_lo, b, b_lo);
        }
      }
    }
    if (copy_async) __syncthreads();  // this stage is read before the next step copies into it
  }

#pragma unroll
  for (int x = 1; x < 4; x *= 2) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, x);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, x);
  }
  // A row without keys (none here: the causal mask keeps key 0) is 0, as torch's safe softmax gives.
  const float inv_lo = l_lo > 0.f ? 1.f / l_lo : 0.f, inv_hi = l_hi > 0.f ? 1.f / l_hi : 0.f;
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long row = i < 2 ? r_lo : r_hi, col = n * 8 + 2 * t + i % 2;
      if (row >= Sq) continue;
      const long long idx = (bh * Sq + row) * D + col;
      const float value = o[n][i] * (i < 2 ? inv_lo : inv_hi);
      if constexpr (OUT_RANK == 0) {
        store_epilogue<Op>(a, idx, value);
      } else {
        store_epilogue<Op>(a, idx, value, [&](int s) {
          const long long* st = a.stride[s];
          return OUT_RANK == 3 ? bh * st[0] + row * st[1] + col * st[2]
                               : bb * st[0] + hh * st[1] + row * st[2] + col * st[3];
        });
      }
    }
}

}  // namespace fusetune
