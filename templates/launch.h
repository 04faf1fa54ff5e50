// Launch geometry of each template family, plain C++ so that the tuner (which times a candidate)
// and the generated extension (which runs the winner) compute the very same grid.
#pragma once
#include "gemm_tma_layout.h"

namespace fusetune {

struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
};

inline long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// One chunk of BLOCK * VEC * ILP elements per block and grid-stride loop beyond 2^31 - 1 blocks.
inline LaunchDims elementwise_launch(int block, int vec, int ilp, long long numel) {
  long long blocks = ceil_div(numel > 0 ? numel : 1, (long long)block * vec * ilp);
  if (blocks > 2147483647LL) blocks = 2147483647LL;
  return LaunchDims{{(unsigned)blocks, 1u, 1u}, {(unsigned)block, 1u, 1u}, 0u};
}

// One BM x BN output tile per block, batches along z (at most 65535 of them).
inline LaunchDims gemm_launch(int bm, int bn, int tm, int tn, long long m, long long n,
                              long long batch) {
  const unsigned threads = (unsigned)((bm / tm) * (bn / tn));
  return LaunchDims{{(unsigned)ceil_div(n, bn), (unsigned)ceil_div(m, bm), (unsigned)batch},
                    {threads, 1u, 1u},
                    0u};
}

// templates/gemm_tma.cuh: one block per output tile, in clusters of `cluster` blocks on
// M-neighbouring tiles (a whole number of them), at most one block per SM (the caller clamps
// grid[0] to the clusters that fit on the device, which only the device knows).
inline LaunchDims gemm_tma_launch(int bm, int bn, int stages, int cluster, long long m, long long n, long long batch) {
  long long clusters = batch * ceil_div(m, (long long)bm * cluster) * ceil_div(n, bn);
  if (clusters < 1) clusters = 1;
  if (clusters > 2147483647LL / cluster) clusters = 2147483647LL / cluster;
  return LaunchDims{{(unsigned)(clusters * cluster), 1u, 1u}, {(unsigned)kGemmTmaThreads, 1u, 1u},
                    (unsigned)gemm_tma_smem_bytes(bm, bn, stages)};
}

}  // namespace fusetune
