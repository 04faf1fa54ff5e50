// The recurrent family's kernel (templates/recurrent.cuh) on KernelBench's 36_LSTMHn shape (T
// 512, batch 10, input 128, 6 layers of 256 units), launched as the extension launches it
// (cooperative, its workspace zeroed once), for lstm_probe.py to check against a float64 LSTM and
// time beside cuDNN and torch.compile through ctypes.
#include <cuda_runtime.h>

#include "recurrent.cuh"

namespace {

constexpr int T = 512, B = 10, I = 128, H = 256, L = 6;

template <int U>
int launch(const fusetune::KernelArgs& args, cudaStream_t stream) {
  auto* kernel = &fusetune::lstm_kernel<U, T, B, I, H, L>;
  const fusetune::LaunchDims d = fusetune::lstm_launch(U, B, I, H, L);
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)d.shared_bytes))
    return e;
  void* params[] = {const_cast<fusetune::KernelArgs*>(&args)};
  return cudaLaunchCooperativeKernel((const void*)kernel, dim3(d.grid[0]), dim3(d.block[0]), params, d.shared_bytes,
                                     stream);
}

}  // namespace

extern "C" {

// The shape the kernels are instantiated for, and the workspace bytes to allocate (zeroed).
void lstm_probe_shape(int* t, int* b, int* i, int* h, int* l) { *t = T, *b = B, *i = I, *h = H, *l = L; }
long long lstm_probe_workspace_bytes() { return fusetune::lstm_workspace_bytes(B, H, L); }

// x[t][b][k] at x[t * sx_t + b * sx_b + k]; h0 and c0 contiguous [L][B][H]; out as
// fusetune::lstm returns it. Units per block: 12, 16, 20 or 24. Returns the cudaError_t of the launch.
int lstm_probe(const float* x, long long sx_t, long long sx_b, const float* h0, const float* c0, const float* w,
               float* out, void* workspace, int units, cudaStream_t stream) {
  fusetune::KernelArgs a{};
  const float* in[] = {x, h0, c0, w};
  for (int s = 0; s < 4; ++s) a.ptr[s] = const_cast<float*>(in[s]);
  a.ptr[4] = out;
  a.ptr[6] = static_cast<float*>(workspace);
  const long long xs[] = {sx_t, sx_b, 1}, hs[] = {(long long)B * H, H, 1};
  for (int d = 0; d < 3; ++d) a.stride[0][d] = xs[d], a.stride[1][d] = a.stride[2][d] = hs[d];
  switch (units) {
    case 12: return launch<12>(a, stream);
    case 16: return launch<16>(a, stream);
    case 20: return launch<20>(a, stream);
    case 24: return launch<24>(a, stream);
  }
  return (int)cudaErrorInvalidValue;
}

}
