// Launch geometry of the reduction kernels (templates/reduce.cuh), plain C++ so that the tuner
// (which times a candidate) and the generated extension (which runs the winner) compute the very
// same grid, as launch.h does for the other families.
#pragma once
#include "launch.h"

namespace fusetune {

// reduce_kernel: one block per output, grid-stride beyond 2^31 - 1 outputs.
inline LaunchDims reduce_launch(int block, long long outputs) {
  const long long blocks = outputs < 1 ? 1 : outputs < 2147483647LL ? outputs : 2147483647LL;
  return LaunchDims{{(unsigned)blocks, 1u, 1u}, {(unsigned)block, 1u, 1u}, 0u};
}

// reduce_thread_kernel: one thread per output.
inline LaunchDims reduce_thread_launch(int block, long long outputs) {
  return reduce_launch(block, ceil_div(outputs < 1 ? 1 : outputs, block));
}

}  // namespace fusetune
