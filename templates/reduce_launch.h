// Launch geometry of the reduction kernels (templates/reduce.cuh), plain C++ so that the tuner
// (which times a candidate) and the generated extension (which runs the winner) compute the very
// same grid, as launch.h does for the other families.
#pragma once
#include "launch.h"
#include "reduce_limits.h"

namespace fusetune {

// reduce_kernel: one block per row, grid-stride beyond 2^31 - 1 rows.
inline LaunchDims reduce_launch(int block, long long outputs) {
  const long long blocks = outputs < 1 ? 1 : outputs < 2147483647LL ? outputs : 2147483647LL;
  return LaunchDims{{(unsigned)blocks, 1u, 1u}, {(unsigned)block, 1u, 1u}, 0u};
}

// reduce_split_kernel: `chunks` blocks per row.
inline LaunchDims reduce_split_launch(int block, int chunks, long long rows) { return reduce_launch(block, rows * chunks); }

// Its workspace: the statistics of every block, then a counter per row.
inline long long reduce_split_workspace_bytes(long long rows, int stats) { return 4 * rows * ((long long)kMaxChunks * stats + 1); }

// reduce_thread_kernel: `rows` x `rvec` rows per block, `split` threads per `rvec` rows.
inline LaunchDims reduce_thread_launch(int rows, int split, int rvec, long long outputs) {
  LaunchDims d = reduce_launch(rows, ceil_div(outputs < 1 ? 1 : outputs, (long long)rows * rvec));
  d.block[1] = (unsigned)split;
  return d;
}

// reduce_tile_kernel: as reduce_thread_launch, with the dynamic shared memory that holds the
// block's `rows` x `rvec` rows of k elements for each of the `varying` inputs.
inline long long reduce_tile_bytes(int rows, int rvec, long long k, int varying) {
  return 4LL * (varying < 1 ? 1 : varying) * k * rows * rvec;
}
inline LaunchDims reduce_tile_launch(int rows, int split, int rvec, long long outputs, long long k, int varying) {
  LaunchDims d = reduce_thread_launch(rows, split, rvec, outputs);
  d.shared_bytes = (unsigned)reduce_tile_bytes(rows, rvec, k, varying);
  return d;
}

// reduce_cluster_kernel: `cluster` blocks per row (a multiple of the cluster size), grid-stride
// over the rows beyond 2^31 - 1 blocks.
inline LaunchDims reduce_cluster_launch(int cluster, int block, long long rows) {
  const long long cap = 2147483647LL / cluster, r = rows < 1 ? 1 : rows < cap ? rows : cap;
  return LaunchDims{{(unsigned)(r * cluster), 1u, 1u}, {(unsigned)block, 1u, 1u}, 0u};
}

// reduce_cluster_smem_kernel: as reduce_cluster_launch, with the dynamic shared memory that
// holds a block's part of the row (ceil(k / cluster), in whole float4) for each of the `varying`
// inputs, at most kRowSmem bytes (the rest of a longer row is read again in each pass).
constexpr long long kRowSmem = 200 * 1024;  // dynamic shared memory a row kernel asks for at most
inline LaunchDims reduce_cluster_smem_launch(int cluster, int block, long long rows, long long k, int varying) {
  LaunchDims d = reduce_cluster_launch(cluster, block, rows);
  const long long n = varying < 1 ? 1 : varying, chunk = ((k + cluster - 1) / cluster + 3) / 4 * 4;
  const long long most = kRowSmem / (4 * n) / 4 * 4, kept = chunk < most ? chunk : most;
  d.shared_bytes = (unsigned)(4 * n * (kept > 4 ? kept : 4));
  return d;
}

}  // namespace fusetune
