// Plain tiled fp32 GEMM (SIMT, no tensor cores) with a fused elementwise epilogue:
// C[b, m, n] = Op(sum_k A[b, m, k] * B[b, k, n], ...). A is slot 0 and B slot 1, each read through
// its strides (transposes and broadcast batches cost no copy); edges are predicated. OPERAND:
// float32 operands (0), or float16 (1) / bfloat16 (2) ones converted as they load.
// Tuning parameters: the BM x BN x BK block tile and the TM x TN outputs of each thread.
#pragma once
#include "elementwise.cuh"  // load_full
#include "fusetune_args.h"
#include "fused_math.cuh"
#include "half.cuh"

namespace fusetune {

// Element i of an operand of type OPERAND, as a float.
template <int OPERAND>
__device__ __forceinline__ float operand_at(const float* base, long long i) {
  if constexpr (OPERAND == 0) {
    return base[i];
  } else {
    const unsigned short h = reinterpret_cast<const unsigned short*>(base)[i];
    return OPERAND == 1 ? f16_to_float(h) : bf16_to_float(h);
  }
}

// Loads a ROWS x COLS tile of a strided matrix (element (r, c) at g0 + r * rs + c * cs of g) into
// smem[COLS][ROWS + PAD] (transposed for A, whose rows are then read along a warp) or
// smem[ROWS][COLS + PAD]; the loop order follows the unit-stride dimension so that a warp's loads
// coalesce.
template <int ROWS, int COLS, int THREADS, bool TRANSPOSE, int LD, int OPERAND>
__device__ __forceinline__ void load_tile(float* smem, const float* g, long long g0, long long rs, long long cs,
                                          long long r0, long long c0, long long rmax, long long cmax) {
  const bool cols_fast = cs == 1 || rs != 1;
#pragma unroll
  for (int e = threadIdx.x; e < ROWS * COLS; e += THREADS) {
    const int r = cols_fast ? e / COLS : e % ROWS;
    const int c = cols_fast ? e % COLS : e / ROWS;
    const long long gr = r0 + r, gc = c0 + c;
    const float v = (gr < rmax && gc < cmax) ? operand_at<OPERAND>(g, g0 + gr * rs + gc * cs) : 0.f;
    if (TRANSPOSE) smem[c * LD + r] = v; else smem[r * LD + c] = v;
  }
}

// Output element idx of a product-like kernel's group: Op applied to the anchor's value and the
// full inputs at idx, the float32 outputs stored (Op::apply stores the others), output slot s's
// at where(s) (idx, or where the slot's strides place the element).
template <class Op, class Where>
__device__ __forceinline__ void store_epilogue(const KernelArgs& a, long long idx, float value, Where where) {
  float x[Op::kIn];
  float y[out_count<Op>()];
  x[0] = value;
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) {
    float v[1];
    load_full<Op, 1>(a, s, idx, v);
    x[1 + s] = v[0];
  }
  Op::template apply<0>(a, idx, x, y);  // the epilogue keeps accurate libm arithmetic
#pragma unroll
  for (int o = 0; o < Op::kOut; ++o) a.ptr[Op::kOutSlot + o][where(Op::kOutSlot + o)] = y[o];
}

template <class Op>
__device__ __forceinline__ void store_epilogue(const KernelArgs& a, long long idx, float value) {
  store_epilogue<Op>(a, idx, value, [idx](int) { return idx; });
}

template <int BM, int BN, int BK, int TM, int TN, class Op, int OPERAND = 0>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) gemm_kernel(const KernelArgs a) {
  constexpr int RT = BM / TM, CT = BN / TN, THREADS = RT * CT;
  constexpr int LDA = BM + 4, LDB = BN + 4;
  __shared__ float As[BK * LDA];
  __shared__ float Bs[BK * LDB];
  const long long M = a.m, N = a.n, K = a.k, bz = blockIdx.z;
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  const float* A = a.ptr[0];  // batch bz's matrices start bz * stride[s][0] elements in
  const float* B = a.ptr[1];
  const long long a0 = bz * a.stride[0][0], b0 = bz * a.stride[1][0];
  const int tr = threadIdx.x / CT, tc = threadIdx.x % CT;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  for (long long k0 = 0; k0 < K; k0 += BK) {
    load_tile<BM, BK, THREADS, true, LDA, OPERAND>(As, A, a0, a.stride[0][1], a.stride[0][2], row0, k0, M, K);
    load_tile<BK, BN, THREADS, false, LDB, OPERAND>(Bs, B, b0, a.stride[1][1], a.stride[1][2], k0, col0, K, N);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float ra[TM], rb[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) ra[i] = As[kk * LDA + tr + i * RT];
#pragma unroll
      for (int j = 0; j < TN; ++j) rb[j] = Bs[kk * LDB + tc + j * CT];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long row = row0 + tr + i * RT;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const long long col = col0 + tc + j * CT;
      if (col >= N) continue;
      store_epilogue<Op>(a, (bz * M + row) * N + col, acc[i][j]);
    }
  }
}

}  // namespace fusetune
