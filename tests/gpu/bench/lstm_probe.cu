// Whether a recurrent family would pay: a multi-layer LSTM (unidirectional, fp32) as one
// persistent kernel, against what fusetune plans today (a GEMM and a gate pass per step and
// layer) and PyTorch's cuDNN LSTM. Called from lstm_probe.py through ctypes, which checks it
// against a float64 LSTM and times it beside eager PyTorch and torch.compile.
//
// The layers run as a wavefront: at global step s, layer l computes its time step t = s - l, so
// T + L - 1 steps cover all layers (T * L one layer at a time). Each block owns U hidden units
// of one layer: their 4U gate rows of [W_ih | W_hh] stay in shared memory for the whole
// sequence, and their cell states too. A step loads the layer's input (x_t, or the layer
// below's h_t) and its own h_{t-1} from a double buffer in global memory, multiplies, applies
// the gates and writes h_t; then the grid synchronizes (cooperative launch).
//
// Weights packed per layer, in order: w_ih [4H][I_l], w_hh [4H][H], b_ih [4H], b_hh [4H]
// (PyTorch's gate order i, f, g, o); I_0 = I, later layers I_l = H.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;  // gate rows a warp multiplies at once (4U is a multiple of 4)

__host__ __device__ inline long long layer_offset(int l, int I, int H) {
  if (l == 0) return 0;
  return 4LL * H * (I + H) + 8LL * H + (long long)(l - 1) * (8LL * H * H + 8LL * H);
}

__host__ __device__ inline int max_k(int I, int H) { return (I > H ? I : H) + H; }

inline long long smem_floats(int U, int B, int MAXB, int I, int H) {
  const long long K = max_k(I, H);
  return 4LL * U * K + (long long)B * K + 4LL * U * MAXB + (long long)U * MAXB;
}

__device__ __forceinline__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

template <int MAXB>
__global__ void __launch_bounds__(kThreads) lstm_wavefront(const float* __restrict__ x, long long sx_t, long long sx_b,
                                                          const float* __restrict__ h0, const float* __restrict__ c0,
                                                          const float* __restrict__ w, float* y, float* hn, float* cn,
                                                          float* hbuf, int T, int B, int I, int H, int L, int U) {
  extern __shared__ float smem[];
  const int tiles = (H + U - 1) / U;
  const int l = blockIdx.x / tiles, u0 = (blockIdx.x % tiles) * U;
  const int units = min(U, H - u0);
  const int Il = l == 0 ? I : H, K = Il + H;
  const int kmax = max_k(I, H);
  float* w_s = smem;                  // [4U][K]: row gate * U + jj is gate row gate * H + u0 + jj
  float* in_s = w_s + 4 * U * kmax;   // [B][K]: the layer's input, then h_{t-1}
  float* g_s = in_s + B * kmax;       // [4U][MAXB]: the gates' products
  float* c_s = g_s + 4 * U * MAXB;    // [U][MAXB]: the cell states
  const float* w_ih = w + layer_offset(l, I, H);
  const float* w_hh = w_ih + 4LL * H * Il;
  const float* b_ih = w_hh + 4LL * H * H;
  const float* b_hh = b_ih + 4 * H;
  const long long BH = (long long)B * H;

  for (int e = threadIdx.x; e < 4 * U * K; e += kThreads) {
    const int r = e / K, k = e % K, gate = r / U, jj = r % U;
    float v = 0.f;
    if (jj < units) {
      const long long row = (long long)gate * H + u0 + jj;
      v = k < Il ? w_ih[row * Il + k] : w_hh[row * H + (k - Il)];
    }
    w_s[e] = v;
  }
  for (int e = threadIdx.x; e < U * B; e += kThreads) {
    const int jj = e / B, b = e % B;
    c_s[jj * MAXB + b] = jj < units ? c0[l * BH + (long long)b * H + u0 + jj] : 0.f;
  }

  cg::grid_group grid = cg::this_grid();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int s = 0; s < T + L - 1; ++s) {
    const int t = s - l;
    if (t >= 0 && t < T) {
      // Written by other blocks during the last step: read past L1 (__ldcg), which may hold the
      // buffer's contents of two steps ago.
      const float* below = hbuf + ((long long)(l - 1) * 2 + (t & 1)) * BH;
      const float* prev = hbuf + ((long long)l * 2 + ((t - 1) & 1)) * BH;
      for (int e = threadIdx.x; e < B * K; e += kThreads) {
        const int b = e / K, k = e % K;
        float v;
        if (k < Il) v = l == 0 ? x[t * sx_t + b * sx_b + k] : __ldcg(below + (long long)b * H + k);
        else v = t == 0 ? h0[l * BH + (long long)b * H + (k - Il)] : __ldcg(prev + (long long)b * H + (k - Il));
        in_s[e] = v;
      }
      __syncthreads();
      for (int r0 = warp * kRows; r0 < 4 * U; r0 += (kThreads / 32) * kRows) {
        float acc[kRows][MAXB];
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
          for (int b = 0; b < MAXB; ++b) acc[i][b] = 0.f;
        for (int k = lane; k < K; k += 32) {
          float wv[kRows];
#pragma unroll
          for (int i = 0; i < kRows; ++i) wv[i] = w_s[(r0 + i) * K + k];
#pragma unroll
          for (int b = 0; b < MAXB; ++b)
            if (b < B) {
              const float xv = in_s[b * K + k];
#pragma unroll
              for (int i = 0; i < kRows; ++i) acc[i][b] = fmaf(wv[i], xv, acc[i][b]);
            }
        }
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
          for (int b = 0; b < MAXB; ++b) {
            if (b >= B) continue;
            float v = acc[i][b];
#pragma unroll
            for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0) g_s[(r0 + i) * MAXB + b] = v;
          }
      }
      __syncthreads();
      for (int e = threadIdx.x; e < units * B; e += kThreads) {
        const int jj = e / B, b = e % B, j = u0 + jj;
        const float gi = g_s[(0 * U + jj) * MAXB + b] + b_ih[j] + b_hh[j];
        const float gf = g_s[(1 * U + jj) * MAXB + b] + b_ih[H + j] + b_hh[H + j];
        const float gg = g_s[(2 * U + jj) * MAXB + b] + b_ih[2 * H + j] + b_hh[2 * H + j];
        const float go = g_s[(3 * U + jj) * MAXB + b] + b_ih[3 * H + j] + b_hh[3 * H + j];
        const float c = sigmoid(gf) * c_s[jj * MAXB + b] + sigmoid(gi) * tanhf(gg);
        const float h = sigmoid(go) * tanhf(c);
        c_s[jj * MAXB + b] = c;
        hbuf[((long long)l * 2 + (t & 1)) * BH + (long long)b * H + j] = h;
        if (l == L - 1) y[((long long)t * B + b) * H + j] = h;
        if (t == T - 1) {
          hn[l * BH + (long long)b * H + j] = h;
          cn[l * BH + (long long)b * H + j] = c;
        }
      }
    }
    grid.sync();
  }
}

template <int MAXB>
int launch(const float* x, long long sx_t, long long sx_b, const float* h0, const float* c0, const float* w, float* y,
           float* hn, float* cn, float* hbuf, int T, int B, int I, int H, int L, int U, cudaStream_t stream) {
  const size_t bytes = smem_floats(U, B, MAXB, I, H) * sizeof(float);
  auto* kernel = &lstm_wavefront<MAXB>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes)) return e;
  void* args[] = {&x, &sx_t, &sx_b, &h0, &c0, &w, &y, &hn, &cn, &hbuf, &T, &B, &I, &H, &L, &U};
  const unsigned blocks = (unsigned)(L * ((H + U - 1) / U));
  return cudaLaunchCooperativeKernel((const void*)kernel, dim3(blocks), dim3(kThreads), args, bytes, stream);
}

}  // namespace

extern "C" {

// Bytes of dynamic shared memory a block takes with U units per block (0 past sm_90's 227 KB).
long long lstm_probe_smem(int U, int B, int I, int H) {
  const int maxb = B <= 4 ? 4 : B <= 8 ? 8 : 16;
  const long long bytes = smem_floats(U, B, maxb, I, H) * 4;
  return bytes <= 227 * 1024 ? bytes : 0;
}

// y [T][B][H] (the last layer's h_t), hn and cn [L][B][H]; x[t][b][k] at x[t * sx_t + b * sx_b + k];
// h0, c0 [L][B][H]; hbuf 2 L B H floats of scratch. Returns the cudaError_t of the launch.
int lstm_probe(const float* x, long long sx_t, long long sx_b, const float* h0, const float* c0, const float* w,
               float* y, float* hn, float* cn, float* hbuf, int T, int B, int I, int H, int L, int U,
               cudaStream_t stream) {
  if (B <= 4) return launch<4>(x, sx_t, sx_b, h0, c0, w, y, hn, cn, hbuf, T, B, I, H, L, U, stream);
  if (B <= 8) return launch<8>(x, sx_t, sx_b, h0, c0, w, y, hn, cn, hbuf, T, B, I, H, L, U, stream);
  if (B <= 16) return launch<16>(x, sx_t, sx_b, h0, c0, w, y, hn, cn, hbuf, T, B, I, H, L, U, stream);
  return (int)cudaErrorInvalidValue;
}

}
