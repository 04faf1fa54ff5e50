// What the microbenchmarks share: a CUDA error check, the timing protocol of MEASURE.md (L2 flushed
// before each run, one event pair per run, warm-up runs dropped, median) and their input data.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));               \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

struct Timing {
  float median_ms, min_ms;
};

// `warm` untimed runs of `run`, then `runs` timed ones; before each, a buffer twice the size of
// L2 is overwritten.
inline Timing time_runs(int runs, int warm, const std::function<void()>& run) {
  static float* flush = nullptr;
  static size_t flush_bytes = 0;
  if (!flush) {
    int l2 = 0;
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    flush_bytes = 2 * (size_t)l2;
    CHECK(cudaMalloc(&flush, flush_bytes));
  }
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warm + runs; ++i) {
    CHECK(cudaMemsetAsync(flush, i, flush_bytes));
    CHECK(cudaEventRecord(e0));
    run();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warm) ms.push_back(t);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

// n floats of a fixed pseudo-random sequence in [-0.5, 0.5), written to device memory `dev`.
inline void fill_uniform(float* dev, long long n, unsigned seed = 12345) {
  std::vector<float> h(n);
  unsigned s = seed;
  for (auto& v : h) v = (s = s * 1664525u + 1013904223u) / 4294967296.f - 0.5f;
  CHECK(cudaMemcpy(dev, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}
