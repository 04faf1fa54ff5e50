// dlopen-based cuDNN loader and the worker's engine list for a conv group.
#include "cudnn_group.h"

#include <dlfcn.h>

#include "error.h"
#include "util.h"

namespace fusetune {

const Cudnn& cudnn_api(const std::string& path) {
  static const std::string loaded_path = path;
  static const Cudnn api = [&] {
    const std::string lib_name = path.empty() ? "libcudnn.so.9" : path;
    void* lib = ::dlopen(lib_name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) FT_USER_ERROR("cannot load cuDNN (" + lib_name + "): " + std::string(::dlerror()));
    Cudnn a;
#define FT_LOAD(name)                                                                          \
  a.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));                           \
  if (!a.name) FT_USER_ERROR(lib_name + " lacks " + #name + ": fusetune needs cuDNN 9 or newer");
    FT_CUDNN_FUNCTIONS(FT_LOAD)
#undef FT_LOAD
    return a;
  }();
  if (path != loaded_path) FT_THROW("cuDNN already loaded from " + loaded_path + ", not " + path);
  return api;
}

ConvSpec conv_spec(const ConvParams& c) {
  ConvSpec s;
  s.spatial = (int)c.stride.size();
  s.transposed = c.transposed;
  for (int d = 0; d < s.spatial; ++d) {
    s.stride[d] = c.stride[d];
    s.padding[d] = c.padding[d];
    s.dilation[d] = c.dilation[d];
    s.output_padding[d] = c.output_padding[d];
  }
  return s;
}

CudnnGroup::CudnnGroup(const std::string& library_path, const Group& g, const KernelArgs& a)
    : api_(cudnn_api(library_path)), args_(a) {
  if (api_.cudnnCreate(&handle_) != CUDNN_STATUS_SUCCESS) FT_THROW("cudnnCreate failed");
  conv_ = std::make_unique<CudnnConv>(api_, handle_, a, conv_spec(g.conv), g.conv.groups);
  if (!conv_->ok()) FT_THROW("cuDNN cannot describe the convolution of " + g.id + ": " + conv_->error());
  for (const CudnnEngine& e : conv_->engines())
    if (!e.reduced) engines_.push_back(e);  // down-converting engines fail fp32's and TF32's accuracy alike
}

CudnnGroup::~CudnnGroup() {
  if (conv_) conv_->destroy(plan_);
  conv_.reset();
  if (workspace_) Driver::get().cuMemFree_v2(workspace_);
  if (handle_) api_.cudnnDestroy(handle_);
}

std::function<CUresult(CUstream)> CudnnGroup::prepare(bool tf32, int rank, float* y, json& library, std::string& unavailable) {
  std::vector<const CudnnEngine*> mine;
  for (const CudnnEngine& e : engines_)
    if (e.tensor_core == tf32) mine.push_back(&e);
  if (rank >= (int)mine.size()) {
    unavailable = "cuDNN's heuristics offer " + std::to_string(mine.size()) + (tf32 ? " tensor-core" : " non-tensor-core") +
                  " engine configurations for this convolution";
    return nullptr;
  }
  const CudnnEngine& e = *mine[rank];
  json knobs = json::array(), constants = json::array({hex64(e.knobs.size())});
  for (const auto& [type, value] : e.knobs) {
    knobs.push_back(json::array({type, value}));
    constants.push_back(hex64((uint64_t)type));
    constants.push_back(hex64((uint64_t)value));
  }
  const size_t version = api_.cudnnGetVersion();
  library = {{"name", "cudnn"},          {"version", version},   {"compute", tf32 ? "tf32" : "fp32"},
             {"engine", e.index},        {"knobs", knobs},       {"rank", rank},
             {"workspace_bytes", e.workspace},
             {"constants", {{"ENGINE_INDEX", e.index}, {"KNOBS", constants}, {"CUDNN_TUNED_VERSION", version}}}};
  if (!e.why.empty()) {
    unavailable = "engine " + std::to_string(e.index) + ": " + e.why;
    return nullptr;
  }
  for (const void* p : {(const void*)args_.ptr[0], (const void*)args_.ptr[1], (const void*)y})
    if ((uintptr_t)p % 16) {
      unavailable = "the convolution's tensors are not 16-byte aligned";
      return nullptr;
    }
  conv_->destroy(plan_);
  const CudnnConv::Plan p = conv_->plan(e);
  plan_ = p.plan;
  if (!plan_) {
    unavailable = "engine " + std::to_string(e.index) + ": " + p.why;
    return nullptr;
  }
  if ((size_t)p.workspace > workspace_bytes_) {  // grown as engines need, as the extension sizes its own
    if (workspace_) Driver::get().cuMemFree_v2(workspace_);
    workspace_ = 0;
    workspace_bytes_ = 0;
    if (Driver::get().cuMemAlloc_v2(&workspace_, (size_t)p.workspace) != CUDA_SUCCESS) {
      workspace_ = 0;
      unavailable = "engine " + std::to_string(e.index) + " needs " + std::to_string(p.workspace >> 20) +
                    " MiB of workspace, more than the device has free";
      return nullptr;
    }
    workspace_bytes_ = (size_t)p.workspace;
  }
  return [this, y](CUstream stream) {
    const cudnnStatus_t s = conv_->run(plan_, args_, y, reinterpret_cast<void*>(workspace_), (cudaStream_t)stream);
    error_ = s == CUDNN_STATUS_SUCCESS ? "" : std::string("cuDNN: ") + api_.cudnnGetErrorString(s);
    return s == CUDNN_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  };
}

}  // namespace fusetune
