// Limits shared by the row kernels (templates/reduce.cuh, NVRTC and nvcc) and their launch and
// workspace arithmetic (templates/reduce_launch.h, host C++).
#pragma once

namespace fusetune {

constexpr int kMaxChunks = 512;  // reduce_split_kernel: most blocks sharing one row

}  // namespace fusetune
