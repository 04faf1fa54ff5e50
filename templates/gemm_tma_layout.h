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

}  // namespace fusetune
