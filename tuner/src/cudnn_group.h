// cuDNN for the measuring worker, loaded with dlopen from the library PyTorch itself loads (the
// one the built extension will run with), and the worker's view of one conv group: the engine
// configurations cuDNN offers for it, ranked, each planned on demand.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cudnn_conv.h"
#include "driver.h"
#include "json.h"
#include "plan.h"

namespace fusetune {

// Loads cuDNN from `path` (or the dynamic loader's search path when empty) once per process;
// throws UserError naming the library when it cannot be loaded.
const Cudnn& cudnn_api(const std::string& path);

ConvSpec conv_spec(const ConvParams& c);

class CudnnGroup {
 public:
  // a: the group's kernel arguments on the device (x in slot 0, the weight in slot 1).
  CudnnGroup(const std::string& library_path, const Group& g, const KernelArgs& a);
  ~CudnnGroup();
  CudnnGroup(const CudnnGroup&) = delete;
  CudnnGroup& operator=(const CudnnGroup&) = delete;

  // How to run engine `rank` among the tensor-core (tf32) or the other engines, writing y; fills
  // `library` (best.json's record and the constants the extension bakes), or sets `unavailable`
  // and returns nullptr.
  std::function<CUresult(CUstream)> prepare(bool tf32, int rank, float* y, json& library, std::string& unavailable);
  // The last run's cuDNN error ("" when it succeeded).
  const std::string& error() const { return error_; }

 private:
  const Cudnn& api_;
  const KernelArgs args_;
  cudnnHandle_t handle_ = nullptr;
  std::unique_ptr<CudnnConv> conv_;
  std::vector<CudnnEngine> engines_;
  CUdeviceptr workspace_ = 0;  // the largest any engine planned so far needs
  size_t workspace_bytes_ = 0;
  cudnnBackendDescriptor_t plan_ = nullptr;  // of the candidate being measured
  std::string error_;
};

}  // namespace fusetune
