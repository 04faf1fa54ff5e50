// The split tail of templates/gemm_tma.cuh and the persistent grid it implies, shared by the
// kernel (NVRTC), the measuring worker and the extension's launcher (host C++; tma_map.h).
#pragma once

#include "gemm_tma_layout.h"  // FUSETUNE_HOST_DEVICE

namespace fusetune {

// Operand element types of the TMA GEMM (the dtype of its operand slots): float32 read as TF32,
// float16 and bfloat16 as they are, and float32 as 3xTF32 (each value split into its TF32 part
// and its remainder, three products, each k-tile's sums added in float32: float32's accuracy).
// A k-tile is one 128-byte row of a box: 32 floats or 64 halves.
constexpr int kGemmTmaFloat32 = 0, kGemmTmaFloat16 = 1, kGemmTmaBfloat16 = 2, kGemmTma3xTF32 = 3;
FUSETUNE_HOST_DEVICE constexpr bool gemm_tma_half(int operand) {
  return operand == kGemmTmaFloat16 || operand == kGemmTmaBfloat16;
}
FUSETUNE_HOST_DEVICE constexpr int gemm_tma_k_tile(int operand) { return gemm_tma_half(operand) ? 64 : 32; }
// A 3xTF32 stage also holds the operands' remainders: the shared memory of two stages
// (gemm_tma_smem_bytes of 2 x STAGES).
FUSETUNE_HOST_DEVICE constexpr int gemm_tma_stage_units(int operand) { return operand == kGemmTma3xTF32 ? 2 : 1; }
// The rows of B's tensor-map box, which each block of a cluster of `cluster` loads per k-tile:
// BN / cluster rows along n (K-major B), or k-tile / cluster rows along k of each 64-column block
// (MN-major B, half operands).
FUSETUNE_HOST_DEVICE constexpr int gemm_tma_b_box_rows(int bn, int cluster, int operand, bool b_mn) {
  return (b_mn ? gemm_tma_k_tile(operand) : bn) / cluster;
}

// The split tail (stream-K's simplest form): a persistent grid of `clusters` runs `tiles` cluster
// tiles in rounds; when the last round would leave at least half of the clusters idle, each of
// its `tail` tiles is cut along K into `ways` parts run by different clusters at once, so that
// round takes 1 / ways of the time. Part 0 of a tile (its owner) adds the others' partial sums,
// which they leave in a workspace, and runs the epilogue. Units: `full` whole tiles, then
// tail x ways parts (part j of tail tile i is unit full + j * tail + i). Every part keeps at
// least kGemmTmaMinSplitKTiles k-tiles: below that the partial sums' round trip through L2 costs
// about what the split saves.
constexpr int kGemmTmaMaxSplit = 4;
constexpr int kGemmTmaMinSplitKTiles = 16;
struct GemmTmaSplit {
  long long full;  // tiles run whole
  int tail;        // tiles run in parts
  int ways;        // parts per tail tile (1: no split)
  FUSETUNE_HOST_DEVICE constexpr long long units() const { return full + (long long)tail * ways; }
};
FUSETUNE_HOST_DEVICE constexpr GemmTmaSplit gemm_tma_split(long long tiles, int clusters, long long k_tiles) {
  const long long rest = clusters > 0 ? tiles % clusters : 0;
  long long ways = rest > 0 ? clusters / rest : 1;
  if (ways > kGemmTmaMaxSplit) ways = kGemmTmaMaxSplit;
  if (ways > k_tiles / kGemmTmaMinSplitKTiles) ways = k_tiles / kGemmTmaMinSplitKTiles;
  if (ways < 2) return GemmTmaSplit{tiles, 0, 1};
  return GemmTmaSplit{tiles - rest, (int)rest, (int)ways};
}
// Its workspace: a counter per tail tile, block of the cluster and consumer warpgroup (parts
// that have left their sums), then the partial BM x BN tiles of parts 1 .. ways - 1 of every
// block. Zeroed once when allocated: each owner sets its counter back to 0.
FUSETUNE_HOST_DEVICE constexpr long long gemm_tma_split_counters(const GemmTmaSplit& s, int cluster) {
  return ((long long)s.tail * cluster * 2 + 3) / 4 * 4;  // 16-byte aligned partials after them
}
FUSETUNE_HOST_DEVICE constexpr long long gemm_tma_split_bytes(const GemmTmaSplit& s, int bm, int bn, int cluster) {
  return s.ways < 2 ? 0
                    : 4 * (gemm_tma_split_counters(s, cluster) + (long long)s.tail * (s.ways - 1) * cluster * bm * bn);
}

// The persistent grid where `resident` blocks fit at once: a block per unit of work (a whole tile
// or a part of a split tail tile) up to that, in whole clusters, and the workspace its split
// needs. The kernel derives the same split from its grid and its k-tiles of k_tile elements.
struct GemmTmaGrid {
  unsigned blocks;
  long long workspace_bytes;
};
FUSETUNE_HOST_DEVICE inline GemmTmaGrid gemm_tma_grid(int bm, int bn, int cluster, long long m, long long n,
                                                      long long k, long long batch, int resident, int k_tile = 32) {
  const long long tiles = batch * ((m + (long long)bm * cluster - 1) / ((long long)bm * cluster)) * ((n + bn - 1) / bn);
  const int clusters = resident / cluster > 0 ? resident / cluster : 1;
  const long long k_tiles = (k + k_tile - 1) / k_tile;
  const GemmTmaSplit all = gemm_tma_split(tiles, clusters, k_tiles);
  long long used = all.units() < clusters ? all.units() : clusters;
  if (used < 1) used = 1;
  const GemmTmaSplit split = gemm_tma_split(tiles, (int)used, k_tiles);
  return GemmTmaGrid{(unsigned)(used * cluster), gemm_tma_split_bytes(split, bm, bn, cluster)};
}

}  // namespace fusetune
