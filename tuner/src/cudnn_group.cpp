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

CudnnGroup::CudnnGroup(const std::string& library_path, const Group& g, const KernelArgs& a, Transpose transpose)
    : api_(cudnn_api(library_path)), spec_(conv_spec(g.conv)), groups_(g.conv.groups), id_(g.id), args_(a),
      transpose_(std::move(transpose)) {
  if (api_.cudnnCreate(&handle_) != CUDNN_STATUS_SUCCESS) FT_THROW("cudnnCreate failed");
}

CudnnGroup::~CudnnGroup() {
  if (planned_) planned_->destroy(plan_);
  for (ConvInLayout& l : layouts_) l.conv.reset();
  for (CUdeviceptr p : {workspace_, channels_last_[0], channels_last_[1]})
    if (p) Driver::get().cuMemFree_v2(p);
  if (handle_) api_.cudnnDestroy(handle_);
}

CudnnGroup::ConvInLayout& CudnnGroup::layout(int l) {
  ConvInLayout& out = layouts_[l];
  if (out.conv) return out;
  out.conv = std::make_unique<CudnnConv>(api_, handle_, args_, spec_, groups_, l == 1);
  if (!out.conv->ok())
    FT_THROW("cuDNN cannot describe the " + std::string(l == 1 ? "channels-last " : "") + "convolution of " + id_ + ": " +
             out.conv->error());
  for (const CudnnEngine& e : out.conv->engines())
    if (!e.reduced) out.engines.push_back(e);  // down-converting engines fail fp32's and TF32's accuracy alike
  return out;
}

namespace {

// Whether slot s of a is contiguous over its first `rank` dimensions.
bool contiguous(const KernelArgs& a, int s, int rank) {
  long long expect = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (a.size[s][d] != 1 && a.stride[s][d] != expect) return false;
    expect *= a.size[s][d];
  }
  return true;
}

}  // namespace

std::function<CUresult(CUstream)> CudnnGroup::prepare(bool tf32, int layout_index, int rank, float* y, json& library,
                                                      std::string& unavailable) {
  const bool channels_last = layout_index == 1;
  const int tensor_rank = 2 + spec_.spatial;
  if (channels_last && !(contiguous(args_, 0, tensor_rank) && contiguous(args_, 1, tensor_rank))) {
    unavailable = "the channels-last layout transposes contiguous inputs; x or the weight is a strided view";
    return nullptr;
  }
  const ConvInLayout& lay = layout(layout_index);
  if (channels_last)
    for (int t = 0; t < 3; ++t)
      if (lay.conv->dims(t).n > kMaxGridZ) {
        unavailable = "the channels-last transposes take at most " + std::to_string(kMaxGridZ) + " batches";
        return nullptr;
      }
  std::vector<const CudnnEngine*> mine;
  for (const CudnnEngine& e : lay.engines)
    if (e.tensor_core == tf32) mine.push_back(&e);
  if (rank >= (int)mine.size()) {
    unavailable = "cuDNN's heuristics offer " + std::to_string(mine.size()) + (tf32 ? " tensor-core" : " non-tensor-core") +
                  " engine configurations for this convolution" + (channels_last ? " channels-last" : "");
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
  library = {{"name", "cudnn"},
             {"version", version},
             {"compute", tf32 ? "tf32" : "fp32"},
             {"layout", channels_last ? "channels_last" : "channels_first"},
             {"engine", e.index},
             {"knobs", knobs},
             {"rank", rank},
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
  if (planned_) planned_->destroy(plan_);
  const CudnnConv::Plan p = lay.conv->plan(e);
  plan_ = p.plan;
  planned_ = lay.conv.get();
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
  KernelArgs conv_args = args_;
  if (channels_last) {
    for (int t = 0; t < 2; ++t) {
      const size_t bytes = (size_t)lay.conv->dims(t).numel() * sizeof(float);
      if (!channels_last_[t] && Driver::get().cuMemAlloc_v2(&channels_last_[t], bytes) != CUDA_SUCCESS) {
        channels_last_[t] = 0;
        unavailable = "no device memory for the channels-last copies of x and the weight";
        return nullptr;
      }
      conv_args.ptr[t] = reinterpret_cast<float*>(channels_last_[t]);
    }
  }
  const CudnnConv* conv = lay.conv.get();
  return [this, conv, conv_args, channels_last, y](CUstream stream) {
    if (channels_last)
      for (int t = 0; t < 2; ++t)
        if (const CUresult r = transpose_(args_.ptr[t], conv_args.ptr[t], conv->dims(t), stream); r != CUDA_SUCCESS) return r;
    const cudnnStatus_t s = conv->run(plan_, conv_args, y, reinterpret_cast<void*>(workspace_), (cudaStream_t)stream);
    error_ = s == CUDNN_STATUS_SUCCESS ? "" : std::string("cuDNN: ") + api_.cudnnGetErrorString(s);
    return s == CUDNN_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  };
}

}  // namespace fusetune
