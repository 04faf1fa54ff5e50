// Tensor-core GEMM in TF32 (mma.sync m16n8k8, fp32 accumulation) with the same fused epilogue
// contract as gemm.cuh: C[b, m, n] = Op(sum_k A[b, m, k] * B[b, k, n], ...), operands read through
// their strides with predicated edges. Tuning parameters: the BM x BN x BK block tile and the
// WM x WN warps sharing it. Single-stage shared-memory pipeline (first version; issue 3 adds
// asynchronous multi-stage copies). Candidates run only under the tf32 precision policy and,
// like every candidate, only count when they pass the check against PyTorch's fp32 result.
#pragma once
#include "fused_math.cuh"
#include "fusetune_args.h"
#include "gemm.cuh"

namespace fusetune {

__device__ __forceinline__ unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// c += a (16x8, row-major fragment) * b (8x8, column-major fragment).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM, int BN, int BK, int WM, int WN, class Op>
__global__ void __launch_bounds__(32 * WM * WN) gemm_tf32_kernel(const KernelArgs a) {
  constexpr int THREADS = 32 * WM * WN;
  constexpr int TM = BM / WM, TN = BN / WN;  // one warp's tile
  constexpr int FM = TM / 16, FN = TN / 8;   // its mma fragments
  constexpr int LDA = BM + 8, LDB = BN + 8;  // +8 floats: fragment reads hit 32 distinct banks
  __shared__ float As[BK * LDA];             // As[k][m]
  __shared__ float Bs[BK * LDB];             // Bs[k][n]
  const long long M = a.m, N = a.n, K = a.k, bz = blockIdx.z;
  const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
  const float* A = a.ptr[0] + bz * a.stride[0][0];
  const float* B = a.ptr[1] + bz * a.stride[1][0];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WN, wn = warp % WN;
  const int g = lane / 4, t = lane % 4;  // PTX's groupID and threadID_in_group

  float acc[FM][FN][4];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (long long k0 = 0; k0 < K; k0 += BK) {
    load_tile<BM, BK, THREADS, true, LDA>(As, A, a.stride[0][1], a.stride[0][2], row0, k0, M, K);
    load_tile<BK, BN, THREADS, false, LDB>(Bs, B, a.stride[1][1], a.stride[1][2], k0, col0, K, N);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      unsigned af[FM][4], bf[FN][2];
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        const int m = wm * TM + i * 16 + g;
        af[i][0] = to_tf32(As[(kk + t) * LDA + m]);
        af[i][1] = to_tf32(As[(kk + t) * LDA + m + 8]);
        af[i][2] = to_tf32(As[(kk + t + 4) * LDA + m]);
        af[i][3] = to_tf32(As[(kk + t + 4) * LDA + m + 8]);
      }
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        const int n = wn * TN + j * 8 + g;
        bf[j][0] = to_tf32(Bs[(kk + t) * LDB + n]);
        bf[j][1] = to_tf32(Bs[(kk + t + 4) * LDB + n]);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) mma_tf32(acc[i][j], af[i], bf[j]);
    }
    __syncthreads();
  }

  // Accumulator c[2h + e] of fragment (i, j) is row g + 8h, column 2t + e of that 16x8 tile.
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long row = row0 + wm * TM + i * 16 + g + 8 * h;
      if (row >= M) continue;
#pragma unroll
      for (int j = 0; j < FN; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long col = col0 + wn * TN + j * 8 + 2 * t + e;
          if (col >= N) continue;
          const long long idx = (bz * M + row) * N + col;
          float x[Op::kIn];
          float y[Op::kOut];
          x[0] = acc[i][j][2 * h + e];
#pragma unroll
          for (int s = 0; s < Op::kFull; ++s) x[1 + s] = a.ptr[Op::kFullSlot + s][idx];
          Op::template apply<0>(a, idx, x, y);
#pragma unroll
          for (int o = 0; o < Op::kOut; ++o) a.ptr[Op::kOutSlot + o][idx] = y[o];
        }
    }
}

}  // namespace fusetune
