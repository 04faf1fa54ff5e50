// How fast the channels-last transposes around a cuDNN convolution run (templates/conv_epilogue.cuh):
// [n, c, s] -> [n, s, c] on the shapes of depthwise_conv2d and conv_transpose2d_tanh, and back
// ([n, s, c] -> [n, c, s] is the same transpose with c and s swapped, which is the access pattern
// of channels_last_epilogue_kernel). torch.compile's Triton copies take 390 us for depthwise's x
// (4.12 TB/s) and 61 us for conv_transpose's; ours are not measured apart from the convolution.
//   tile32: to_channels_last_kernel as the extension runs it (32 x 32 tile, pairs of floats where
//           the sizes are even, 128 threads with all their loads in flight first; before 2026-12-04
//           one float at a time, one load at a time);
//   t32x32: transpose_vec<32, 32, 1, 256> (every load of a thread in flight before the tile is
//           stored; t32x32n: 128 threads). Larger tiles (64 x 64, 32 x 128, 128 x 32, 96 x 64,
//           with 256 or 512 threads) were slower on every shape and are gone (docs/PERF.md);
//   vVtRxQ: an R x Q tile moving V-element vectors on both sides (shapes with rows and columns
//           multiples of 4; w: twice the threads);
//   copy:   a float4 copy of the same bytes (the ceiling); copy1: the same with 4-byte accesses.
// Each output is compared with t32x32's (bitwise).
//   bash tests/gpu/bench/run.sh transpose, or ./transpose_probe [runs] once built
#include <cstring>
#include <type_traits>

#include "bench.h"
#include "conv_epilogue.cuh"

// [n, r, q] -> [n, q, r] through a TR x TQ tile moving V-element vectors on both sides (r and q
// multiples of V): each thread loads its vectors into registers first (all loads in flight before
// the first shared-memory store), V neighbours along q, and stores V neighbours along r, gathered
// from V rows of the tile. The tile is padded by one column, so that the column reads of the store
// phase hit 32 banks. Grid (ceil(q / TQ), ceil(r / TR), n).
template <int TR, int TQ, int V, int THREADS>
__global__ void __launch_bounds__(THREADS) transpose_vec(const float* __restrict__ in, float* __restrict__ out,
                                                         long long r, long long q) {
  using Vec = std::conditional_t<V == 4, float4, std::conditional_t<V == 2, float2, float>>;
  constexpr int kEach = TR * TQ / V / THREADS;
  static_assert(kEach * THREADS * V == TR * TQ, "the threads must cover the tile");
  __shared__ float tile[TR][TQ + 1];
  const long long q0 = (long long)blockIdx.x * TQ, r0 = (long long)blockIdx.y * TR;
  const long long base = (long long)blockIdx.z * r * q;
  Vec v[kEach];
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * THREADS, i = u / (TQ / V), j = V * (u % (TQ / V));
    if (r0 + i < r && q0 + j < q) v[e] = *reinterpret_cast<const Vec*>(in + base + (r0 + i) * q + q0 + j);
  }
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * THREADS, i = u / (TQ / V), j = V * (u % (TQ / V));
    const float* f = reinterpret_cast<const float*>(&v[e]);
#pragma unroll
    for (int k = 0; k < V; ++k) tile[i][j + k] = f[k];
  }
  __syncthreads();
#pragma unroll
  for (int e = 0; e < kEach; ++e) {
    const int u = threadIdx.x + e * THREADS, j = u / (TR / V), i = V * (u % (TR / V));
    if (r0 + i >= r || q0 + j >= q) continue;
    Vec w;
    float* f = reinterpret_cast<float*>(&w);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = tile[i + k][j];
    *reinterpret_cast<Vec*>(out + base + (q0 + j) * r + r0 + i) = w;
  }
}

template <int TR, int TQ, int V, int THREADS>
void launch_vec(const float* in, float* out, long long n, long long r, long long q) {
  if (r % V || q % V) return;  // not this variant's shapes (the check then reports WRONG)
  transpose_vec<TR, TQ, V, THREADS><<<dim3((unsigned)((q + TQ - 1) / TQ), (unsigned)((r + TR - 1) / TR), (unsigned)n), THREADS>>>(
      in, out, r, q);
}

__global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
}

__global__ void copy1(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

struct Shape {
  const char* name;
  long long n, r, q;  // [n, r, q] -> [n, q, r]
};

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  const Shape shapes[] = {{"depthwise x to NHWC", 32, 96, 65536},
                          {"depthwise y to NCHW", 32, 65536, 96},
                          {"conv_transpose x to NHWC", 32, 64, 16384},
                          {"conv_transpose y to NCHW", 32, 65536, 32},
                          {"conv2d_relu_bias x to NHWC", 32, 32, 65536},
                          {"conv2d_relu_bias y to NCHW", 32, 65536, 64},
                          {"irregular", 3, 37, 1001},
                          {"irregular, even", 3, 38, 1002}};
  long long most = 0;
  for (const Shape& s : shapes) most = std::max(most, s.n * s.r * s.q);
  float *x, *y, *ref;
  CHECK(cudaMalloc(&x, most * 4));
  CHECK(cudaMalloc(&y, most * 4));
  CHECK(cudaMalloc(&ref, most * 4));
  fill_uniform(x, most);
  std::vector<float> want(most), got(most);
  bool all_match = true;
  for (const Shape& s : shapes) {
    const long long count = s.n * s.r * s.q;
    const double bytes = 2.0 * 4 * count;
    const dim3 tile_grid((unsigned)((s.q + fusetune::kTile - 1) / fusetune::kTile),
                         (unsigned)((s.r + fusetune::kTile - 1) / fusetune::kTile), (unsigned)s.n);
    auto tile32 = [&](float* out) {  // as cudnn_conv.h's channels_last_launch
      fusetune::to_channels_last_kernel<float><<<tile_grid, fusetune::kTileThreads>>>(x, out, s.r, s.q);
    };
    launch_vec<32, 32, 1, 256>(x, ref, s.n, s.r, s.q);  // the reference: one float per access
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(want.data(), ref, count * 4, cudaMemcpyDeviceToHost));
    std::printf("%s: [%lld, %lld, %lld], %.3f GB moved\n", s.name, s.n, s.r, s.q, bytes / 1e9);
    auto report = [&](const char* name, bool check, const std::function<void()>& run) {
      CHECK(cudaMemset(y, 0, count * 4));
      const float med = time_runs(runs, runs > 1 ? 3 : 0, run).median_ms;
      bool match = true;
      if (check) {
        CHECK(cudaMemcpy(got.data(), y, count * 4, cudaMemcpyDeviceToHost));
        match = std::memcmp(got.data(), want.data(), count * 4) == 0;
        all_match &= match;
      }
      std::printf("  %-8s %8.4f ms  %6.3f TB/s  %s\n", name, med, bytes / (med * 1e-3) / 1e12,
                  !check ? "" : match ? "matches t32x32" : "WRONG");
    };
    report("copy", false, [&] {
      copy4<<<(unsigned)((count / 4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), count / 4);
    });
    report("copy1", false, [&] { copy1<<<(unsigned)((count + 255) / 256), 256>>>(x, y, count); });
    report("tile32", true, [&] { tile32(y); });
    report("t32x32", true, [&] { launch_vec<32, 32, 1, 256>(x, y, s.n, s.r, s.q); });
    report("t32x32n", true, [&] { launch_vec<32, 32, 1, 128>(x, y, s.n, s.r, s.q); });
    if (s.r % 4 == 0 && s.q % 4 == 0) {
      report("v2t32x32", true, [&] { launch_vec<32, 32, 2, 128>(x, y, s.n, s.r, s.q); });
      report("v2t32x32w", true, [&] { launch_vec<32, 32, 2, 256>(x, y, s.n, s.r, s.q); });
      report("v4t32x32", true, [&] { launch_vec<32, 32, 4, 64>(x, y, s.n, s.r, s.q); });
      report("v4t32x32w", true, [&] { launch_vec<32, 32, 4, 128>(x, y, s.n, s.r, s.q); });
      report("v4t32x64", true, [&] { launch_vec<32, 64, 4, 128>(x, y, s.n, s.r, s.q); });
    }
  }
  return all_match ? 0 : 1;
}
