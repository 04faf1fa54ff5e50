// How many L1 requests a 2-D max pooling needs per output, and what that costs: maxpool2d's
// shape (32 x 64 x 384 x 384, window 3, stride 2, padding 1) with six loop shapes, each checked
// against the first. Timing as in bench.h: L2 flushed before each run, median of 20.
// Bytes = input read + output written.
//   nvcc -O3 -arch=sm_90 -o pool_probe pool_probe.cu && ./pool_probe [timed runs per loop shape,
//   default 20] (one run each under ncu, with no warm-up).
//   taps_vec2: each output's nine taps as scalar loads, two neighbouring outputs per thread (the
//              generated kernel's loop before paired rows); taps_vec1: one output per thread;
//   taps_pair: one output per thread, each row's taps as a scalar and an aligned float2 (the
//              stride is even, so the columns' parity is known at compile time);
//   rows_vec4: a thread's two outputs share one float4 load per input row (their four own
//              columns) plus the left neighbour column as a scalar load;
//   rows_shfl: the same with the left column taken from the neighbouring lane by a shuffle;
//   rows_2x:   rows_vec4 for two output rows per thread (five input rows instead of six).
#include <cmath>

#include "bench.h"

constexpr int H = 384, W = 384, OH = 192, OW = 192;
constexpr long long PLANES = 32 * 64;

__device__ __forceinline__ float vmax(float a, float b) { return (b > a || b != b) ? b : a; }

template <int VEC>
__global__ void taps(const float* __restrict__ x, float* __restrict__ y) {
  const long long first = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (first >= PLANES * OH * OW) return;
  float out[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const long long o = first + j;
    const int ox = (int)(o % OW), oy = (int)(o / OW % OH);
    const float* plane = x + o / (OH * OW) * H * W;
    float acc = -INFINITY;
#pragma unroll
    for (int t = 0; t < 9; ++t) {
      const int iy = oy * 2 - 1 + t / 3, ix = ox * 2 - 1 + t % 3;
      if ((unsigned)iy < H && (unsigned)ix < W) acc = vmax(acc, plane[iy * W + ix]);
    }
    out[j] = acc;
  }
  if (VEC == 2) *reinterpret_cast<float2*>(y + first) = make_float2(out[0], out[1]);
  else y[first] = out[0];
}

__global__ void taps_pair(const float* __restrict__ x, float* __restrict__ y) {
  const long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= PLANES * OH * OW) return;
  const int ox = (int)(o % OW), oy = (int)(o / OW % OH);
  const float* plane = x + o / (OH * OW) * H * W;
  float acc = -INFINITY;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const int iy = oy * 2 - 1 + r;
    if ((unsigned)iy >= H) continue;
    const float* row = plane + iy * W;
    const float2 c = *reinterpret_cast<const float2*>(row + 2 * ox);  // columns 2ox, 2ox + 1
    acc = vmax(vmax(acc, c.x), c.y);
    if (ox > 0) acc = vmax(acc, row[2 * ox - 1]);
  }
  y[o] = acc;
}

// The three columns of each output of thread t: 4t-1 .. 4t+3 of the row.
__device__ __forceinline__ void row_max(const float* row, int t, bool shfl, float& a, float& b) {
  const float4 c = *reinterpret_cast<const float4*>(row + 4 * t);
  float left;
  if (shfl) {
    left = __shfl_up_sync(0xffffffffu, c.w, 1);
    if ((threadIdx.x & 31) == 0) left = t > 0 ? row[4 * t - 1] : -INFINITY;
  } else {
    left = t > 0 ? row[4 * t - 1] : -INFINITY;
  }
  a = vmax(vmax(vmax(a, left), c.x), c.y);
  b = vmax(vmax(vmax(b, c.y), c.z), c.w);
}

template <int ROWS, bool SHFL>
__global__ void rows(const float* __restrict__ x, float* __restrict__ y) {
  // 96 threads per output row (OW / 2), a multiple of the warp size; ROWS output rows each.
  const long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const int t = (int)(g % (OW / 2));
  const long long r = g / (OW / 2) * ROWS;  // first output row (plane * OH + oy)
  if (r >= PLANES * OH) return;
  const int oy = (int)(r % OH);
  const float* plane = x + r / OH * H * W;
  float a[ROWS], b[ROWS];
#pragma unroll
  for (int k = 0; k < ROWS; ++k) a[k] = b[k] = -INFINITY;
#pragma unroll
  for (int i = 0; i < 2 * ROWS + 1; ++i) {
    const int iy = oy * 2 - 1 + i;
    if ((unsigned)iy >= H) continue;
    float ra = -INFINITY, rb = -INFINITY;
    row_max(plane + iy * W, t, SHFL, ra, rb);
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
      if (i >= 2 * k && i <= 2 * k + 2) {
        a[k] = vmax(a[k], ra);
        b[k] = vmax(b[k], rb);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < ROWS; ++k) *reinterpret_cast<float2*>(y + (r + k) * OW + 2 * t) = make_float2(a[k], b[k]);
}

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20;  // timed, after 3 untimed ones unless 1
  const long long n_in = PLANES * H * W, n_out = PLANES * OH * OW;
  const double bytes = 4.0 * (n_in + n_out);
  float *x, *y, *ref;
  CHECK(cudaMalloc(&x, n_in * 4));
  CHECK(cudaMalloc(&y, n_out * 4));
  CHECK(cudaMalloc(&ref, n_out * 4));
  fill_uniform(x, n_in);
  auto time = [&](const char* name, const std::function<void()>& run) {
    const float med = time_runs(runs, runs > 1 ? 3 : 0, run).median_ms;
    std::vector<float> got(n_out), want(n_out);
    CHECK(cudaMemcpy(got.data(), y, n_out * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(want.data(), ref, n_out * 4, cudaMemcpyDeviceToHost));
    long long bad = 0;
    for (long long i = 0; i < n_out; ++i) bad += got[i] != want[i];
    std::printf("%-10s %8.4f ms  %6.3f TB/s  %s\n", name, med, bytes / (med * 1e-3) / 1e12,
                bad ? "WRONG" : "matches taps_vec2");
  };
  taps<2><<<(unsigned)(n_out / 2 / 128), 128>>>(x, ref);
  CHECK(cudaDeviceSynchronize());
  std::printf("maxpool 3x3 / 2, pad 1: %lld x %d x %d -> %d x %d, %.3f GB moved\n", PLANES, H, W, OH, OW, bytes / 1e9);
  time("taps_vec2", [&] { taps<2><<<(unsigned)(n_out / 2 / 128), 128>>>(x, y); });
  time("taps_vec1", [&] { taps<1><<<(unsigned)(n_out / 256), 256>>>(x, y); });
  time("taps_pair", [&] { taps_pair<<<(unsigned)(n_out / 256), 256>>>(x, y); });
  time("rows_vec4", [&] { rows<1, false><<<(unsigned)(n_out / 2 / 256), 256>>>(x, y); });
  time("rows_shfl", [&] { rows<1, true><<<(unsigned)(n_out / 2 / 256), 256>>>(x, y); });
  time("rows_2x", [&] { rows<2, false><<<(unsigned)(n_out / 4 / 256), 256>>>(x, y); });
  return 0;
}
