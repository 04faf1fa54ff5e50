// The block shape and shared-memory size of templates/gemm_tma.cuh, shared by the kernel (NVRTC,
// nvcc) and its launch geometry (templates/launch.h, host C++).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define FUSETUNE_HOST_DEVICE __host__ __device__
#else
#define FUSETUNE_HOST_DEVICE
#endif

namespace fusetune {

// Two consumer warpgroups and a producer warpgroup. Shared memory holds STAGES ring stages of
// BM + BN rows of 128 bytes, two 64x32 fp32 staging chunks per consumer, a full and an empty
// mbarrier per stage, the two consumers' turn mbarriers (ping-pong), the watchdog's progress
// words and 1 KB of alignment slack.
constexpr int kGemmTmaThreads = 384;
constexpr int kGemmTmaStagingBytes = 2 * 2 * 64 * 32 * 4;
constexpr int kGemmTmaWatchBytes = 16;
FUSETUNE_HOST_DEVICE constexpr int gemm_tma_smem_bytes(int bm, int bn, int stages) {
  return stages * (bm + bn) * 128 + kGemmTmaStagingBytes + 2 * stages * 8 + 2 * 8 + kGemmTmaWatchBytes + 1024;
}

// The split tail (stream-K's simplest form): a persistent grid of `clusters` runs `tiles` cluster
// tiles in rounds; when the last round would leave at least half of the clusters idle, each of
// its `tail` tiles is cut along K into `ways` parts run by different clusters at once, so that
// round takes 1 / ways of the time. Part 0 of a tile (its owner) adds the others' partial sums,
// which they leave in a workspace, and runs the epilogue. Units: `full` whole tiles, then
// tail x ways parts (part j of tail tile i is unit full + j * tail + i). Every part keeps at
// least kGemmTmaMinSplitKTiles k-tiles of 32: below that the partial sums' round trip through
// L2 costs about what the split saves.
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

}  // namespace fusetune
