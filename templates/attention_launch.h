// Launch geometry of the fused attention kernel (templates/attention.cuh), plain C++ so that the
// tuner and the generated extension compute the same grid, as launch.h does for other families.
#pragma once
#include "launch.h"

namespace fusetune {

// Dynamic shared memory: `stages` pairs of K and V tiles of bn rows of d + 4 floats.
inline long long attention_smem_bytes(int bn, long long d, int stages) { return 2LL * stages * bn * (d + 4) * 4; }

// One block per 16 * warps query rows of one batch and head (heads along y, at most 65535).
inline LaunchDims attention_launch(int warps, int bn, long long d, int stages, long long rows, long long heads) {
  return LaunchDims{{(unsigned)ceil_div(rows > 0 ? rows : 1, 16LL * warps), (unsigned)heads, 1u},
                    {(unsigned)(32 * warps), 1u, 1u},
                    (unsigned)attention_smem_bytes(bn, d, stages)};
}

}  // namespace fusetune
