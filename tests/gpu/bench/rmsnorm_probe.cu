// Which loop shape moves rmsnorm_channels' 2.4 GB closest to the copy rate: y = x / sqrt(mean over
// the 96 channels of x^2 + eps) on 48 x 96 x 256 x 256 (each (n, position) reduces 96 values
// 256 KB apart). reduce_tile (the generated winner, 0.61 ms, 3.95 TB/s) keeps a block's 64
// positions x 96 channels in shared memory; these loops vary how wide a block's run of positions
// is and where the values wait between the sum and the store. Timing as in bench.h; each output
// is compared with tile<64>'s (relative 1e-5).
//   nvcc -O3 -arch=sm_90 -o rmsnorm_probe rmsnorm_probe.cu && ./rmsnorm_probe [timed runs, default 20]
//   copy:      a float4 copy of the same bytes (the ceiling);
//   tile<W>:   W positions x 96 channels per block kept in shared memory (W = 64 is reduce_tile's
//              shape), float4 loads and stores;
//   regs<V>:   each thread keeps V neighbouring positions' 96 channels in registers (regs<2, H>:
//              streamed stores, H = 2 streamed loads too);
//   reread<W>: no copy kept: the sum's pass reads the block's tile, the store's pass reads it
//              again (from L2, if the tiles in flight fit).
#include <cmath>

#include "bench.h"

constexpr int N = 48, C = 96;
constexpr long long S = 256 * 256;
constexpr float kEps = 1e-5f;
constexpr int kThreads = 256;

__global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
}

// Block b: batch n = b / (S / W), positions [s0, s0 + W).
template <int W>
__global__ void __launch_bounds__(kThreads) tile(const float* __restrict__ x, float* __restrict__ y) {
  extern __shared__ float4 smem4[];
  float* t = reinterpret_cast<float*>(smem4);  // [C][W]
  __shared__ float inv[W];
  const long long n = blockIdx.x / (S / W), s0 = blockIdx.x % (S / W) * W;
  const float* xb = x + n * C * S + s0;
  float* yb = y + n * C * S + s0;
  constexpr int Q = W / 4;  // float4s per channel row
  for (int i = threadIdx.x; i < C * Q; i += kThreads) {
    const int c = i / Q, q = i % Q;
    smem4[i] = *reinterpret_cast<const float4*>(xb + c * S + 4 * q);
  }
  __syncthreads();
  // SPLIT threads per position, neighbouring lanes on neighbouring positions (no bank conflicts).
  constexpr int SPLIT = kThreads / W;
  __shared__ float part[kThreads];
  const int p = threadIdx.x % W;
  float acc = 0.f;
  for (int c = threadIdx.x / W; c < C; c += SPLIT) acc += t[c * W + p] * t[c * W + p];
  part[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < W) {
    for (int k = 1; k < SPLIT; ++k) acc += part[k * W + p];
    inv[p] = 1.f / sqrtf(acc / C + kEps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < C * Q; i += kThreads) {
    const int c = i / Q, q = i % Q;
    float4 v = smem4[i];
    v.x *= inv[4 * q], v.y *= inv[4 * q + 1], v.z *= inv[4 * q + 2], v.w *= inv[4 * q + 3];
    *reinterpret_cast<float4*>(yb + c * S + 4 * q) = v;
  }
}

// HINT 1: stores streamed (st.global.cs: evict first); HINT 2: loads streamed too (ld.global.cs).
template <int V, int HINT = 0>
__global__ void __launch_bounds__(128) regs(const float* __restrict__ x, float* __restrict__ y) {
  const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // a run of V positions
  const long long n = g / (S / V), s = g % (S / V) * V;
  const float* xb = x + n * C * S + s;
  float v[C][V];
  float acc[V] = {};
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (V == 2) {
      const float2* q = reinterpret_cast<const float2*>(xb + c * S);
      const float2 t = HINT == 2 ? __ldcs(q) : *q;
      v[c][0] = t.x, v[c][V - 1] = t.y;
    } else {
      v[c][0] = xb[c * S];
    }
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] += v[c][j] * v[c][j];
  }
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 1.f / sqrtf(acc[j] / C + kEps);
  float* yb = y + n * C * S + s;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float2* q = reinterpret_cast<float2*>(yb + c * S);
    const float2 t = make_float2(v[c][0] * acc[0], v[c][V - 1] * acc[V - 1]);
    if (V == 2 && HINT > 0) __stcs(q, t);
    else if (V == 2) *q = t;
    else yb[c * S] = v[c][0] * acc[0];
  }
}

template <int W>
__global__ void __launch_bounds__(kThreads) reread(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float part[kThreads];
  __shared__ float inv[W];
  const long long n = blockIdx.x / (S / W), s0 = blockIdx.x % (S / W) * W;
  const float* xb = x + n * C * S + s0;
  float* yb = y + n * C * S + s0;
  constexpr int Q = W / 4, ROWS = kThreads / Q;  // a thread's float4 column, ROWS channels at a time
  const int q = threadIdx.x % Q, r = threadIdx.x / Q;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int c = r; c < C; c += ROWS) {
    const float4 v = *reinterpret_cast<const float4*>(xb + c * S + 4 * q);
    acc.x += v.x * v.x, acc.y += v.y * v.y, acc.z += v.z * v.z, acc.w += v.w * v.w;
  }
  // Sum the ROWS partials of each position through shared memory.
  float* acc_f = reinterpret_cast<float*>(&acc);
  for (int j = 0; j < 4; ++j) {
    part[threadIdx.x] = acc_f[j];
    __syncthreads();
    if (r == 0) {
      float s = 0.f;
      for (int k = 0; k < ROWS; ++k) s += part[k * Q + q];
      inv[4 * q + j] = 1.f / sqrtf(s / C + kEps);
    }
    __syncthreads();
  }
  const float4 m = make_float4(inv[4 * q], inv[4 * q + 1], inv[4 * q + 2], inv[4 * q + 3]);
  for (int c = r; c < C; c += ROWS) {
    float4 v = *reinterpret_cast<const float4*>(xb + c * S + 4 * q);
    v.x *= m.x, v.y *= m.y, v.z *= m.z, v.w *= m.w;
    *reinterpret_cast<float4*>(yb + c * S + 4 * q) = v;
  }
}

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  const long long n = (long long)N * C * S;
  const double bytes = 2.0 * 4 * n;
  float *x, *y, *ref;
  CHECK(cudaMalloc(&x, n * 4));
  CHECK(cudaMalloc(&y, n * 4));
  CHECK(cudaMalloc(&ref, n * 4));
  fill_uniform(x, n);
  CHECK(cudaFuncSetAttribute(tile<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, C * 64 * 4));
  CHECK(cudaFuncSetAttribute(tile<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, C * 128 * 4));
  CHECK(cudaFuncSetAttribute(tile<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, C * 256 * 4));
  tile<64><<<(unsigned)(N * S / 64), kThreads, C * 64 * 4>>>(x, ref);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> want(n), got(n);
  CHECK(cudaMemcpy(want.data(), ref, n * 4, cudaMemcpyDeviceToHost));
  auto time = [&](const char* name, bool check, const std::function<void()>& run) {
    CHECK(cudaMemset(y, 0, n * 4));
    const float med = time_runs(runs, runs > 1 ? 3 : 0, run).median_ms;
    long long bad = 0;
    if (check) {
      CHECK(cudaMemcpy(got.data(), y, n * 4, cudaMemcpyDeviceToHost));
      for (long long i = 0; i < n; ++i) bad += std::fabs(got[i] - want[i]) > 1e-5f * std::fabs(want[i]) + 1e-7f;
    }
    std::printf("%-10s %8.4f ms  %6.3f TB/s  %s\n", name, med, bytes / (med * 1e-3) / 1e12,
                !check ? "" : bad ? "WRONG" : "matches tile<64>");
  };
  std::printf("rmsnorm over %d channels: %d x %d x %lld, %.3f GB moved\n", C, N, C, S, bytes / 1e9);
  time("copy", false, [&] { copy4<<<(unsigned)(n / 4 / 256), 256>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n / 4); });
  time("tile<64>", true, [&] { tile<64><<<(unsigned)(N * S / 64), kThreads, C * 64 * 4>>>(x, y); });
  time("tile<128>", true, [&] { tile<128><<<(unsigned)(N * S / 128), kThreads, C * 128 * 4>>>(x, y); });
  time("tile<256>", true, [&] { tile<256><<<(unsigned)(N * S / 256), kThreads, C * 256 * 4>>>(x, y); });
  time("regs<1>", true, [&] { regs<1><<<(unsigned)(N * S / 128), 128>>>(x, y); });
  time("regs<2>", true, [&] { regs<2><<<(unsigned)(N * S / 2 / 128), 128>>>(x, y); });
  time("regs<2,1>", true, [&] { regs<2, 1><<<(unsigned)(N * S / 2 / 128), 128>>>(x, y); });
  time("regs<2,2>", true, [&] { regs<2, 2><<<(unsigned)(N * S / 2 / 128), 128>>>(x, y); });
  time("reread<64>", true, [&] { reread<64><<<(unsigned)(N * S / 64), kThreads>>>(x, y); });
  time("reread<128>", true, [&] { reread<128><<<(unsigned)(N * S / 128), kThreads>>>(x, y); });
  return 0;
}
