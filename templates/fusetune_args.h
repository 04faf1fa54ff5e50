// The one kernel-argument block every fusetune kernel takes, shared by the tuner (host C++),
// NVRTC-compiled candidates and the extension (nvcc), so that all three agree on its layout.
#pragma once

namespace fusetune {

constexpr int kMaxSlots = 12;  // tensors a kernel touches: inputs first, then outputs
constexpr int kMaxRank = 6;

// A slot is a tensor view: element (i0, ..., ir) lives at ptr[sum(i_d * stride[d])].
// Sizes of broadcast inputs are those of the value they are combined with, strides 0 where
// they broadcast, so that a linear output index maps to an input element without extra data.
struct KernelArgs {
  float* ptr[kMaxSlots];
  long long size[kMaxSlots][kMaxRank];
  long long stride[kMaxSlots][kMaxRank];
  long long numel;  // elements of the kernel's index space (its outputs)
  long long m, n, k, batch;  // matrix-product families only
};

// A TMA tensor map (CUtensorMap: 128 bytes, 128-byte aligned, opaque), passed to a kernel as a
// __grid_constant__ parameter (templates/gemm_tma.cuh); encoded by templates/tma_map.h.
struct alignas(128) TmaMap {
  unsigned long long opaque[16];
};

}  // namespace fusetune
