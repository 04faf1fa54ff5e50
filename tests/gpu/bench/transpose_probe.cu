// How fast the channels-last transposes around a cuDNN convolution run (templates/conv_epilogue.cuh):
// [n, c, s] -> [n, s, c] on the shapes of depthwise_conv2d and conv_transpose2d_tanh, and back
// ([n, s, c] -> [n, c, s] is the same transpose with c and s swapped, which is the access pattern
// of channels_last_epilogue_kernel). torch.compile's Triton copies take 390 us for depthwise's x
// (4.12 TB/s) and 61 us for conv_transpose's; ours are not measured apart from the convolution.
//   tile32: to_channels_last_kernel as the extension runs it (32 x 32 tile, 4-byte accesses);
//   v4:     a tile of 32 rows x 128 columns, float4 loads along the rows and float4 stores along
//           the columns (rows and columns multiples of 4);
//   copy:   a float4 copy of the same bytes (the ceiling).
// Each output is compared with tile32's (bitwise).
//   bash tests/gpu/bench/run.sh transpose, or ./transpose_probe [runs] once built
#include <cstring>

#include "bench.h"
#include "conv_epilogue.cuh"

constexpr int kRows = 32, kCols = 128, kV4Threads = 256;

// [n, r, q] -> [n, q, r] for r and q multiples of 4; grid (ceil(q / kCols), ceil(r / kRows), n).
// The tile is padded by one column so that the column reads of the store phase hit 32 banks.
__global__ void __launch_bounds__(kV4Threads) transpose_v4(const float* __restrict__ in, float* __restrict__ out,
                                                           long long r, long long q) {
  __shared__ float tile[kRows][kCols + 1];
  const long long q0 = (long long)blockIdx.x * kCols, r0 = (long long)blockIdx.y * kRows;
  const long long base = (long long)blockIdx.z * r * q;
  constexpr int kLoadRows = kV4Threads / (kCols / 4);  // rows per load step: 8
  const int lc = threadIdx.x % (kCols / 4), lr = threadIdx.x / (kCols / 4);
  for (int i = lr; i < kRows; i += kLoadRows) {
    const long long ri = r0 + i, qi = q0 + 4 * lc;
    if (ri < r && qi < q) {
      const float4 v = *reinterpret_cast<const float4*>(in + base + ri * q + qi);
      tile[i][4 * lc] = v.x, tile[i][4 * lc + 1] = v.y, tile[i][4 * lc + 2] = v.z, tile[i][4 * lc + 3] = v.w;
    }
  }
  __syncthreads();
  constexpr int kStoreCols = kV4Threads / (kRows / 4);  // columns per store step: 32
  const int sr = threadIdx.x % (kRows / 4), sc = threadIdx.x / (kRows / 4);
  for (int j = sc; j < kCols; j += kStoreCols) {
    const long long qj = q0 + j, rj = r0 + 4 * sr;
    if (qj < q && rj < r)
      *reinterpret_cast<float4*>(out + base + qj * r + rj) =
          make_float4(tile[4 * sr][j], tile[4 * sr + 1][j], tile[4 * sr + 2][j], tile[4 * sr + 3][j]);
  }
}

__global__ void copy4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n4) y[i] = x[i];
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
                          {"conv_transpose y to NCHW", 32, 65536, 32}};
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
      fusetune::to_channels_last_kernel<float><<<tile_grid, dim3(fusetune::kTile, fusetune::kTileRows)>>>(x, out, s.r, s.q);
    };
    auto v4 = [&] {
      transpose_v4<<<dim3((unsigned)((s.q + kCols - 1) / kCols), (unsigned)((s.r + kRows - 1) / kRows), (unsigned)s.n),
                     kV4Threads>>>(x, y, s.r, s.q);
    };
    tile32(ref);
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
                  !check ? "" : match ? "matches tile32" : "WRONG");
    };
    report("copy", false, [&] {
      copy4<<<(unsigned)((count / 4 + 255) / 256), 256>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), count / 4);
    });
    report("tile32", true, [&] { tile32(y); });
    report("v4", true, v4);
  }
  return all_match ? 0 : 1;
}
