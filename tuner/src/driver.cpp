// dlopen-based CUDA Driver API loader and device queries.
#include "driver.h"

#include <dlfcn.h>

#include "error.h"

namespace fusetune {

namespace {

struct Loaded {
  Driver driver;
  std::string error;  // why it could not be loaded
};

Loaded load() {
  Loaded l;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.error = "no CUDA driver on this machine (libcuda.so.1 not found): fusetune needs an NVIDIA GPU for this step";
    return l;
  }
#define FT_LOAD(name)                                                                   \
  l.driver.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));             \
  if (!l.driver.name) {                                                                 \
    l.error = std::string("the CUDA driver lacks ") + #name + ": update the NVIDIA driver"; \
    return l;                                                                           \
  }
  FT_DRIVER_FUNCTIONS(FT_LOAD)
#undef FT_LOAD
  CUresult r = l.driver.cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = l.driver.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0)
    l.error = "the CUDA driver found no usable GPU (" + std::string(r == CUDA_SUCCESS ? "0 devices" : "cuInit failed") + ")";
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Driver& Driver::get() {
  if (!loaded().error.empty()) FT_USER_ERROR(loaded().error);
  return loaded().driver;
}

bool Driver::available() { return loaded().error.empty(); }

std::string cu_error_name(CUresult r) {
  const char* name = nullptr;
  if (Driver::available() && Driver::get().cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string((int)r);
}

bool is_sticky_error(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
      return true;
    default:
      return false;
  }
}

DeviceInfo query_device(int ordinal) {
  CUdevice dev;
  CU_CHECK(cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  char name[256] = {};
  CU_CHECK(cuDeviceGetName(name, sizeof name, dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    CU_CHECK(cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  CU_CHECK(cuDriverGetVersion(&info.driver_version));
  return info;
}

}  // namespace fusetune
