// The copy roofline, measured several ways: device-to-device memcpy and streaming copy kernels
// (vector width, elements in flight per thread, cache hints). Same protocol as the tuner: L2
// flushed before each run, one event pair per run, median. Bytes = read + written.
//   nvcc -O3 -arch=sm_90 -o copy_ceiling copy_ceiling.cu && ./copy_ceiling [floats]
#include "bench.h"

enum Hint { kDefault, kStreaming, kNoAllocate };

template <int ILP, Hint H>
__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
  const long long base = ((long long)blockIdx.x * blockDim.x) * ILP + threadIdx.x;
  float4 v[ILP];
#pragma unroll
  for (int i = 0; i < ILP; ++i) {
    const long long j = base + (long long)i * blockDim.x;
    if (j < n4) {
      if (H == kStreaming) v[i] = __ldcs(in + j);
      else if (H == kNoAllocate) {
        asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                     : "=f"(v[i].x), "=f"(v[i].y), "=f"(v[i].z), "=f"(v[i].w) : "l"(in + j));
      } else v[i] = in[j];
    }
  }
#pragma unroll
  for (int i = 0; i < ILP; ++i) {
    const long long j = base + (long long)i * blockDim.x;
    if (j < n4) {
      if (H == kDefault) out[j] = v[i];
      else __stcs(out + j, v[i]);
    }
  }
}

// Grid-stride loop over a grid of a few waves.
__global__ void copy_grid_stride(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n4; j += (long long)gridDim.x * blockDim.x)
    __stcs(out + j, __ldcs(in + j));
}

int main(int argc, char** argv) {
  const long long n = argc > 1 ? std::atoll(argv[1]) : 8192LL * 65536;  // elementwise_chain's size
  const size_t bytes = n * sizeof(float);
  int sms = 0, l2 = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  float *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 0, bytes));
  const long long n4 = n / 4;
  auto time = [&](const char* name, const std::function<void()>& run) {
    const Timing t = time_runs(20, 3, run);
    std::printf("%-34s %8.4f ms  %6.3f TB/s (min %.4f ms, %6.3f TB/s)\n", name, t.median_ms,
                2.0 * bytes / (t.median_ms * 1e-3) / 1e12, t.min_ms, 2.0 * bytes / (t.min_ms * 1e-3) / 1e12);
  };
  std::printf("copy of %lld floats (%.3f GB read + written), %d SMs, L2 %d bytes\n", n, 2.0 * bytes / 1e9, sms, l2);
  time("cudaMemcpyAsync D2D", [&] { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  const float4* in = reinterpret_cast<const float4*>(a);
  float4* out = reinterpret_cast<float4*>(b);
#define ONE_SHOT(ILP, H, BLOCK)                                                                      \
  time("one-shot v4 ilp" #ILP " " #H " block" #BLOCK, [&] {                                         \
    copy_kernel<ILP, H><<<(unsigned)((n4 + (long long)BLOCK * ILP - 1) / ((long long)BLOCK * ILP)), BLOCK>>>(in, out, n4); \
  })
  ONE_SHOT(1, kDefault, 256);
  ONE_SHOT(2, kDefault, 256);
  ONE_SHOT(4, kDefault, 256);
  ONE_SHOT(1, kStreaming, 256);
  ONE_SHOT(2, kStreaming, 256);
  ONE_SHOT(4, kStreaming, 256);
  ONE_SHOT(8, kStreaming, 128);
  ONE_SHOT(2, kNoAllocate, 256);
  ONE_SHOT(4, kNoAllocate, 512);
  ONE_SHOT(4, kStreaming, 1024);
  for (int waves : {1, 2, 4, 8, 16}) {
    char name[64];
    std::snprintf(name, sizeof name, "grid-stride v4 streaming %dx%d", waves, sms);
    time(name, [&] { copy_grid_stride<<<sms * waves * 2, 1024>>>(in, out, n4); });
  }
  return 0;
}
