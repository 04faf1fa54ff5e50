// The CUDA Driver API, loaded with dlopen at first use so that fusetune runs (and its CPU tests
// pass) on machines without a GPU driver.
#pragma once
#include <cuda.h>

#include <string>

#include "error.h"

namespace fusetune {

#define FT_DRIVER_FUNCTIONS(X)                                                                        \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)              \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)       \
  X(cuCtxSynchronize) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2)         \
  X(cuMemcpyDtoDAsync_v2) X(cuMemsetD8_v2) X(cuMemsetD32_v2) X(cuMemsetD32Async) X(cuModuleLoadData) X(cuModuleUnload) \
  X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchCooperativeKernel) X(cuOccupancyMaxActiveClusters) \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy_v2)  \
  X(cuGetErrorName) X(cuTensorMapEncodeTiled)

struct Driver {
#define FT_DECLARE(name) decltype(&::name) name = nullptr;
  FT_DRIVER_FUNCTIONS(FT_DECLARE)
#undef FT_DECLARE

  // Loads libcuda.so.1 and initialises it; throws UserError when there is no driver or GPU.
  static const Driver& get();
  // True when a driver and at least one GPU are present (never throws).
  static bool available();
};

std::string cu_error_name(CUresult r);
// Errors after which the context is unusable: the process must end.
bool is_sticky_error(CUresult r);

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int clock_khz = 0;
  int driver_version = 0;
  std::string arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }
  // Peak fp32 FMA throughput: SMs x 128 lanes x 2 flops x clock.
  double fp32_peak_flops() const { return (double)sm_count * 128.0 * 2.0 * clock_khz * 1e3; }
  // Peak dense TF32 tensor-core throughput on sm_80/sm_90: SMs x 1024 FMA x 2 flops x clock.
  double tf32_peak_flops() const { return (double)sm_count * 1024.0 * 2.0 * clock_khz * 1e3; }
  // Peak dense float16/bfloat16 tensor-core throughput on sm_80/sm_90: twice TF32's.
  double half_peak_flops() const { return 2.0 * tf32_peak_flops(); }
};

DeviceInfo query_device(int ordinal = 0);

}  // namespace fusetune

#define CU_CHECK(call)                                                                         \
  do {                                                                                         \
    CUresult r_ = ::fusetune::Driver::get().call;                                              \
    if (r_ != CUDA_SUCCESS) FT_THROW(std::string(#call) + " failed: " + ::fusetune::cu_error_name(r_)); \
  } while (0)
