// Sizes and launch geometry of the persistent LSTM kernel (templates/recurrent.cuh), plain C++ so
// that the tuner and the generated extension compute the same grid, and the kernel the same
// offsets.
#pragma once
#include "gemm_tma_layout.h"  // FUSETUNE_HOST_DEVICE
#ifndef __CUDACC_RTC__
#include "launch.h"
#endif

namespace fusetune {

constexpr int kLstmThreads = 256;

// Batch rows padded to a multiple of 4 (the products' per-row slots in shared memory).
FUSETUNE_HOST_DEVICE constexpr int lstm_batch_pad(int b) { return (b + 3) / 4 * 4; }
// Where layer l's weights start in the packed vector (w_ih [4H, I_l], w_hh [4H, H], b_ih, b_hh).
FUSETUNE_HOST_DEVICE constexpr long long lstm_layer_offset(int l, int I, int H) {
  return l == 0 ? 0 : 4LL * H * (I + H) + 8LL * H + (long long)(l - 1) * (8LL * H * H + 8LL * H);
}
// The longest row of [W_ih | W_hh] over the layers.
FUSETUNE_HOST_DEVICE constexpr int lstm_max_k(int I, int H) { return (I > H ? I : H) + H; }
// Dynamic shared memory of a block of U units: its gate rows, the step's inputs, the products, the
// cell states and the gate rows' biases.
FUSETUNE_HOST_DEVICE constexpr long long lstm_smem_bytes(int U, int B, int I, int H) {
  return 4LL * (4LL * U * lstm_max_k(I, H) + (long long)B * lstm_max_k(I, H) + 5LL * U * lstm_batch_pad(B) + 4LL * U);
}
#ifndef __CUDACC_RTC__  // host code (the tuner, the extension's launch) from here on
// The workspace: the grid barrier's two counters (16 bytes), then each layer's last two h_t.
inline long long lstm_workspace_bytes(int B, int H, int L) { return 16 + 8LL * L * B * H; }
inline long long lstm_blocks(int U, int H, int L) { return (long long)L * ceil_div(H, U); }

// One block per U hidden units of each layer, all resident at once (a cooperative launch).
inline LaunchDims lstm_launch(int U, int B, int I, int H, int L) {
  return LaunchDims{{(unsigned)lstm_blocks(U, H, L), 1u, 1u}, {(unsigned)kLstmThreads, 1u, 1u},
                    (unsigned)lstm_smem_bytes(U, B, I, H)};
}
#endif

}  // namespace fusetune
