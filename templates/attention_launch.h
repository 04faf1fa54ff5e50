// Launch geometry of the fused attention kernel (templates/attention.cuh), plain C++ so that the
// tuner and the generated extension compute the same grid, as launch.h does for other families.
#pragma once
#include "launch.h"

namespace fusetune {

// One block per 16 * warps query rows of one batch and head (heads along y, at most 65535).
inline LaunchDims attention_launch(int warps, long long rows, long long heads) {
  return LaunchDims{{(unsigned)ceil_div(rows > 0 ? rows : 1, 16LL * warps), (unsigned)heads, 1u},
                    {(unsigned)(32 * warps), 1u, 1u},
                    0u};
}

}  // namespace fusetune
