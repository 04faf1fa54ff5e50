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
// M-neighbouring tiles (a whole number of them), at most one block per SM: the caller replaces
// grid[0] with gemm_tma_grid's, which needs the blocks that fit on the device.
inline LaunchDims gemm_tma_launch(int bm, int bn, int stages, int cluster, long long m, long long n, long long batch) {
  long long clusters = batch * ceil_div(m, (long long)bm * cluster) * ceil_div(n, bn);
  if (clusters < 1) clusters = 1;
  if (clusters > 2147483647LL / cluster) clusters = 2147483647LL / cluster;
  return LaunchDims{{(unsigned)(clusters * cluster), 1u, 1u}, {(unsigned)kGemmTmaThreads, 1u, 1u},
                    (unsigned)gemm_tma_smem_bytes(bm, bn, stages)};
}

// The persistent grid where `resident` blocks fit at once: a block per unit of work (a whole tile
// or a part of a split tail tile, gemm_tma_layout.h) up to that, in whole clusters, and the
// workspace its split needs. The kernel derives the same split from its grid.
struct GemmTmaGrid {
  unsigned blocks;
  long long workspace_bytes;
};
inline GemmTmaGrid gemm_tma_grid(int bm, int bn, int cluster, long long m, long long n, long long k, long long batch,
                                 int resident) {
  const long long tiles = batch * ceil_div(m, (long long)bm * cluster) * ceil_div(n, bn);
  const int clusters = resident / cluster > 0 ? resident / cluster : 1;
  const long long k_tiles = ceil_div(k, 32);
  const GemmTmaSplit all = gemm_tma_split(tiles, clusters, k_tiles);
  long long used = all.units() < clusters ? all.units() : clusters;
  if (used < 1) used = 1;
  const GemmTmaSplit split = gemm_tma_split(tiles, (int)used, k_tiles);
  return GemmTmaGrid{(unsigned)(used * cluster), gemm_tma_split_bytes(split, bm, bn, cluster)};
}

}  // namespace fusetune
