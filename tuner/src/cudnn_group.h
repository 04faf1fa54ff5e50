// cuDNN for the measuring worker, loaded with dlopen from the library PyTorch itself loads (the
// one the built extension will run with), and the worker's view of one conv group: per layout
// (channels-first as given, or channels-last), the engine configurations cuDNN offers for it,
// ranked, each planned on demand.
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
  // Transposes [n, c, s] at in to [n, s, c] at out (templates/conv_epilogue.cuh's kernel).
  using Transpose = std::function<CUresult(const float* in, float* out, const ConvDims& d, CUstream stream)>;

  // a: the group's kernel arguments on the device (x in slot 0, the weight in slot 1).
  CudnnGroup(const std::string& library_path, const Group& g, const KernelArgs& a, Transpose transpose);
  ~CudnnGroup();
  CudnnGroup(const CudnnGroup&) = delete;
  CudnnGroup& operator=(const CudnnGroup&) = delete;

  // How to run engine `rank` among the tensor-core (tf32) or the other engines of layout 0
  // (channels-first) or 1 (channels-last, x and w transposed first), writing y in that layout;
  // fills `library` (best.json's record and the constants the extension bakes), or sets
  // `unavailable` and returns nullptr.
  std::function<CUresult(CUstream)> prepare(bool tf32, int layout, int rank, float* y, json& library, std::string& unavailable);
  // The last run's cuDNN error ("" when it succeeded).
  const std::string& error() const { return error_; }

 private:
  struct ConvInLayout {
    std::unique_ptr<CudnnConv> conv;
    std::vector<CudnnEngine> engines;
  };
  // The convolution and its engines in layout l, described when first asked for.
  ConvInLayout& layout(int l);

  const Cudnn& api_;
  const ConvSpec spec_;
  const long long groups_;
  const std::string id_;
  const KernelArgs args_;
  const Transpose transpose_;
  cudnnHandle_t handle_ = nullptr;
  ConvInLayout layouts_[2];
  CUdeviceptr channels_last_[2] = {0, 0};  // x and w transposed, made with layout 1
  CUdeviceptr workspace_ = 0;  // the largest any engine planned so far needs
  size_t workspace_bytes_ = 0;
  const CudnnConv* planned_ = nullptr;  // the convolution of plan_
  cudnnBackendDescriptor_t plan_ = nullptr;  // of the candidate being measured
  std::string error_;
};

}  // namespace fusetune
