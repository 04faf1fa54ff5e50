// A multi-layer LSTM (fusetune::lstm, tuner/py/fusetune_py/recurrent.py) as one persistent
// kernel. Slots: 0 x [T, B, I] (any strides), 1 h0 and 2 c0 [L, B, H] (any strides), 3 the
// weights packed per layer (w_ih [4H, I_l], w_hh [4H, H], b_ih [4H], b_hh [4H]; I_0 = I, later
// layers H), 4 the output: the last layer's h_t [T, B, H], then h_n and c_n [L, B, H]. The
// workspace (slot 6, recurrent_launch.h) holds the grid barrier's two counters, zero between
// launches, then each layer's last two h_t.
//
// The layers run as a wavefront: at global step s, layer l computes its time step t = s - l, so
// T + L - 1 steps cover them all. Block (l, tile) owns U hidden units of layer l: their 4U gate
// rows of [W_ih | W_hh] stay in shared memory for the whole sequence, and their cell states too.
// A step loads the layer's input (x_t, or the layer below's h_t) and its own h_{t-1}, multiplies
// (a warp takes 4 gate rows for all B batch rows, its lanes along K, then a warp sum), applies
// the gates and writes h_t; then every block waits for the others (a grid barrier: the launch is
// cooperative, so all L * ceil(H / U) blocks are resident at once). fp32 FMAs throughout.
//
// Tuning parameter: U, hidden units per block (fewer: more blocks, less work each).
#pragma once
#include "fusetune_args.h"
#include "recurrent_launch.h"

namespace fusetune {

constexpr int kLstmRows = 4;  // gate rows a warp multiplies at once (4U is a multiple of 4)

__device__ __forceinline__ float lstm_sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

__device__ __forceinline__ unsigned lstm_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every block arrives, then waits until all gridDim.x have arrived `round` times in all.
__device__ __forceinline__ void lstm_grid_barrier(unsigned* count, unsigned round) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's h_t before its arrival
    atomicAdd(count, 1u);
    while (lstm_load_acquire(count) < round * gridDim.x) __nanosleep(20);
  }
  __syncthreads();
}

template <int U, int T, int B, int I, int H, int L>
__global__ void __launch_bounds__(kLstmThreads) lstm_kernel(KernelArgs a) {
  constexpr int BP = lstm_batch_pad(B), KMAX = lstm_max_k(I, H), TILES = (H + U - 1) / U;
  constexpr long long BH = (long long)B * H;
  extern __shared__ float smem[];
  const int l = blockIdx.x / TILES, u0 = (blockIdx.x % TILES) * U;
  const int units = min(U, H - u0);
  const int Il = l == 0 ? I : H, K = Il + H;
  float* w_s = smem;               // [4U][K]: row gate * U + jj is gate row gate * H + u0 + jj
  float* in_s = w_s + 4 * U * KMAX;  // [B][K]: the layer's input, then h_{t-1}
  float* g_s = in_s + B * KMAX;      // [4U][BP]: the gates' products
  float* c_s = g_s + 4 * U * BP;     // [U][BP]: the cell states
  float* bias_s = c_s + U * BP;      // [4U]: b_ih + b_hh of the block's gate rows
  const float* w_ih = a.ptr[3] + lstm_layer_offset(l, I, H);
  const float* w_hh = w_ih + 4LL * H * Il;
  const float* b_ih = w_hh + 4LL * H * H;
  const float* b_hh = b_ih + 4 * H;
  const float* x = a.ptr[0];
  const float *h0 = a.ptr[1], *c0 = a.ptr[2];
  const long long* xs = a.stride[0];
  const long long *hs = a.stride[1], *cs = a.stride[2];
  float* out = a.ptr[4];
  unsigned* counts = reinterpret_cast<unsigned*>(a.ptr[6]);
  float* hbuf = a.ptr[6] + 4;  // [L][2][B][H]: h_t of layer l at [l][t & 1]

  for (int e = threadIdx.x; e < 4 * U * K; e += kLstmThreads) {
    const int r = e / K, k = e % K, gate = r / U, jj = r % U;
    float v = 0.f;
    if (jj < units) {
      const long long row = (long long)gate * H + u0 + jj;
      v = k < Il ? w_ih[row * Il + k] : w_hh[row * H + (k - Il)];
    }
    w_s[e] = v;
  }
  for (int r = threadIdx.x; r < 4 * U; r += kLstmThreads) {
    const int gate = r / U, jj = r % U;
    bias_s[r] = jj < units ? b_ih[gate * H + u0 + jj] + b_hh[gate * H + u0 + jj] : 0.f;
  }
  for (int e = threadIdx.x; e < U * B; e += kLstmThreads) {
    const int jj = e / B, b = e % B;
    if (jj < units) c_s[jj * BP + b] = c0[l * cs[0] + b * cs[1] + (u0 + jj) * cs[2]];
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int s = 0; s < T + L - 1; ++s) {
    const int t = s - l;
    if (t >= 0 && t < T) {
      // Other blocks wrote these during the last step: read past L1 (__ldcg), which may still
      // hold the buffer's contents of two steps ago.
      const float* below = hbuf + ((long long)(l - 1) * 2 + (t & 1)) * BH;
      const float* prev = hbuf + ((long long)l * 2 + ((t - 1) & 1)) * BH;
      // kLoads loads in flight per thread before any is stored: the step waits about one L2 (or,
      // for x, memory) latency, not one per element.
      constexpr int kLoads = 8;
      for (int e0 = threadIdx.x; e0 < B * K; e0 += kLoads * kLstmThreads) {
        float v[kLoads];
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
          const int e = e0 + i * kLstmThreads, b = e / K, k = e % K;
          v[i] = 0.f;
          if (e >= B * K) continue;
          if (k < Il) v[i] = l == 0 ? x[t * xs[0] + b * xs[1] + k * xs[2]] : __ldcg(below + b * H + k);
          else v[i] = t == 0 ? h0[l * hs[0] + b * hs[1] + (k - Il) * hs[2]] : __ldcg(prev + b * H + (k - Il));
        }
#pragma unroll
        for (int i = 0; i < kLoads; ++i)
          if (e0 + i * kLstmThreads < B * K) in_s[e0 + i * kLstmThreads] = v[i];
      }
      __syncthreads();
      for (int r0 = warp * kLstmRows; r0 < 4 * U; r0 += (kLstmThreads / 32) * kLstmRows) {
        float acc[kLstmRows][B];
#pragma unroll
        for (int i = 0; i < kLstmRows; ++i)
#pragma unroll
          for (int b = 0; b < B; ++b) acc[i][b] = 0.f;
        for (int k = lane; k < K; k += 32) {
          float wv[kLstmRows];
#pragma unroll
          for (int i = 0; i < kLstmRows; ++i) wv[i] = w_s[(r0 + i) * K + k];
#pragma unroll
          for (int b = 0; b < B; ++b) {
            const float xv = in_s[b * K + k];
#pragma unroll
            for (int i = 0; i < kLstmRows; ++i) acc[i][b] = fmaf(wv[i], xv, acc[i][b]);
          }
        }
#pragma unroll
        for (int i = 0; i < kLstmRows; ++i)
#pragma unroll
          for (int b = 0; b < B; ++b) {
            float v = acc[i][b];
#pragma unroll
            for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0) g_s[(r0 + i) * BP + b] = v;
          }
      }
      __syncthreads();
      for (int e = threadIdx.x; e < units * B; e += kLstmThreads) {
        const int jj = e / B, b = e % B, j = u0 + jj;
        float gate[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) gate[q] = g_s[(q * U + jj) * BP + b] + bias_s[q * U + jj];
        const float c = lstm_sigmoid(gate[1]) * c_s[jj * BP + b] + lstm_sigmoid(gate[0]) * tanhf(gate[2]);
        const float h = lstm_sigmoid(gate[3]) * tanhf(c);
        c_s[jj * BP + b] = c;
        hbuf[((long long)l * 2 + (t & 1)) * BH + b * H + j] = h;
        if (l == L - 1) out[((long long)t * B + b) * H + j] = h;
        if (t == T - 1) {
          out[T * BH + l * BH + b * H + j] = h;
          out[T * BH + L * BH + l * BH + b * H + j] = c;
        }
      }
    }
    lstm_grid_barrier(counts, (unsigned)s + 1);
  }
  // The counters back to zero for the next launch: the last block to leave resets both, once
  // every block is past the last barrier's wait.
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counts + 1, 1u) == gridDim.x - 1) {
      atomicExch(counts, 0u);
      atomicExch(counts + 1, 0u);
    }
  }
}
}  // namespace fusetune
