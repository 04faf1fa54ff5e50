// A kernel group's convolution through cuDNN's graph (backend) API, shared by the tuner (which
// loads cuDNN with dlopen and times every engine configuration its heuristics offer) and the
// extension (which links it and rebuilds the baked winner), so that both run the very same plan.
// Host C++ only.
//
// The group's convolution reads x from slot 0 and the weight from slot 1 through their strides and
// writes y contiguous: y = conv(x, w) as torch's convolution, or its transpose (a convolution's
// backward data pass, with x as dy and y as dx). Its bias and every later op are the group's
// epilogue pass (templates/gemm_epilogue.cuh). One-dimensional convolutions run as 2-D ones over
// a height of 1 (cuDNN wants at least 4-D tensors).
//
// Layout 1 (channels-last) describes all three tensors channels-last instead (NHWC; the weight
// KRSC), which many of cuDNN's fast engines want: x and w are then transposed copies of contiguous
// inputs, and the epilogue pass reads y channels-last (templates/conv_epilogue.cuh).
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "channels_last.h"
#include "fusetune_args.h"
#include "launch.h"

namespace fusetune {

#define FT_CUDNN_FUNCTIONS(X)                                                                         \
  X(cudnnCreate) X(cudnnDestroy) X(cudnnGetVersion) X(cudnnSetStream) X(cudnnGetErrorString)          \
  X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor) X(cudnnBackendSetAttribute)        \
  X(cudnnBackendGetAttribute) X(cudnnBackendFinalize) X(cudnnBackendExecute)

// The cuDNN entry points: filled by dlsym in the tuner, by the linker in the extension.
struct Cudnn {
#define FT_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  FT_CUDNN_FUNCTIONS(FT_CUDNN_MEMBER)
#undef FT_CUDNN_MEMBER
};

#ifdef FUSETUNE_CUDNN_LINKED
inline const Cudnn& cudnn_linked() {
  static const Cudnn api = [] {
    Cudnn a;
#define FT_CUDNN_LINK(name) a.name = &::name;
    FT_CUDNN_FUNCTIONS(FT_CUDNN_LINK)
#undef FT_CUDNN_LINK
    return a;
  }();
  return api;
}
#endif

constexpr int kConvMaxSpatial = 3;

// Deprecated in cuDNN 9 in favour of device properties, still what binds a graph to a handle.
constexpr auto kOperationGraphHandle = (cudnnBackendAttributeName_t)800;  // CUDNN_ATTR_OPERATIONGRAPH_HANDLE
constexpr auto kExecutionPlanHandle = (cudnnBackendAttributeName_t)400;   // CUDNN_ATTR_EXECUTION_PLAN_HANDLE

// torch's convolution arguments that are not tensors.
struct ConvSpec {
  int spatial = 2;  // 1, 2 or 3
  bool transposed = false;
  long long stride[kConvMaxSpatial] = {1, 1, 1};
  long long padding[kConvMaxSpatial] = {0, 0, 0};
  long long dilation[kConvMaxSpatial] = {1, 1, 1};
  long long output_padding[kConvMaxSpatial] = {0, 0, 0};
};

// The output's sizes for input sizes x and weight sizes w (each [2 + spatial]), as torch computes them.
inline std::vector<long long> conv_output_sizes(const ConvSpec& c, const long long* x, const long long* w, long long groups) {
  std::vector<long long> y = {x[0], c.transposed ? w[1] * groups : w[0]};
  for (int d = 0; d < c.spatial; ++d) {
    const long long k = c.dilation[d] * (w[2 + d] - 1) + 1;
    y.push_back(c.transposed ? (x[2 + d] - 1) * c.stride[d] - 2 * c.padding[d] + k + c.output_padding[d]
                             : (x[2 + d] + 2 * c.padding[d] - k) / c.stride[d] + 1);
  }
  return y;
}

// A tensor of the convolution as [n, c, s]: batch (or the weight's first dimension), channels
// (its second) and the product of the spatial sizes.
struct ConvDims {
  long long n = 1, c = 1, s = 1;
  long long numel() const { return n * c * s; }
};

inline ConvDims conv_dims(const std::vector<long long>& sizes) {
  ConvDims d{sizes[0], sizes[1], 1};
  for (size_t i = 2; i < sizes.size(); ++i) d.s *= sizes[i];
  return d;
}

// Grid of templates/conv_epilogue.cuh's kernels over [n, c, s]: a block of kTileThreads threads
// per tile of kTile channels x kTile positions, batches along z.
inline LaunchDims channels_last_launch(const ConvDims& d) {
  return LaunchDims{{(unsigned)ceil_div(d.s, kTile), (unsigned)ceil_div(d.c, kTile), (unsigned)d.n},
                    {(unsigned)kTileThreads, 1u, 1u},
                    0u};
}
constexpr long long kMaxGridZ = 65535;

// One engine configuration: cuDNN's global engine index and its knob choices (type, value).
struct CudnnEngine {
  long long index = -1;
  std::vector<std::pair<long long, long long>> knobs;
  bool tensor_core = false;   // TF32 on fp32 data
  bool reduced = false;       // down-converts inputs or reduces in lower precision: never a candidate
  long long workspace = 0;    // bytes, once planned
  std::string why;            // why it cannot be planned ("" when it can)
};

class CudnnConv {
 public:
  // groups: the convolution's groups (x's channels over the weight's second dimension for a forward one).
  CudnnConv(const Cudnn& api, cudnnHandle_t handle, const KernelArgs& a, const ConvSpec& spec, long long groups,
            bool channels_last = false)
      : api_(api), handle_(handle), spec_(spec) {
    const int rank = 2 + spec.spatial, padded = spec.spatial == 1 ? 4 : rank;
    std::vector<long long> xs(a.size[0], a.size[0] + rank), ws(a.size[1], a.size[1] + rank);
    const std::vector<long long> ys = conv_output_sizes(spec, xs.data(), ws.data(), groups);
    dims_[0] = conv_dims(xs);
    dims_[1] = conv_dims(ws);
    dims_[2] = conv_dims(ys);
    std::vector<long long> yst(rank, 1);
    for (int d = rank - 2; d >= 0; --d) yst[d] = yst[d + 1] * ys[d + 1];
    auto describe = [&](std::vector<long long> s, const long long* st, std::vector<long long>& sizes, std::vector<long long>& strides) {
      sizes.assign(s.begin(), s.end());
      strides.assign(st, st + rank);
      if (padded != rank) {  // [n, c, l] as [n, c, 1, l]
        sizes.insert(sizes.begin() + 2, 1);
        strides.insert(strides.begin() + 2, strides[2] * sizes[3]);
      }
      if (channels_last) {  // channels innermost, then the spatial dimensions, the batch outermost
        strides[1] = 1;
        long long next = sizes[1];
        for (size_t d = sizes.size() - 1; d >= 2; --d) {
          strides[d] = next;
          next *= sizes[d];
        }
        strides[0] = next;
      }
    };
    std::vector<long long> sz[3], st[3];
    describe(xs, a.stride[0], sz[0], st[0]);
    describe(ws, a.stride[1], sz[1], st[1]);
    describe(ys, yst.data(), sz[2], st[2]);
    for (int t = 0; t < 3 && ok(); ++t) tensor(t, sz[t], st[t]);
    std::vector<long long> stride, pad, dil;
    if (padded != rank) {  // the height of 1: stride 1, no padding, dilation 1
      stride = {1};
      pad = {0};
      dil = {1};
    }
    for (int d = 0; d < spec.spatial; ++d) {
      stride.push_back(spec.stride[d]);
      pad.push_back(spec.padding[d]);
      dil.push_back(spec.dilation[d]);
    }
    if (ok()) conv_ = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const long long n = padded - 2;
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    set(conv_, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    set(conv_, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    set(conv_, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n);
    set(conv_, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, n, stride.data());
    set(conv_, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, n, pad.data());
    set(conv_, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, n, pad.data());
    set(conv_, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, n, dil.data());
    finalize(conv_, "the convolution");
    const float alpha = 1.f, beta = 0.f;
    if (ok()) op_ = make(spec.transposed ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                         : CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    if (spec.transposed) {  // torch's transposed convolution is the backward data pass: x is dy, y is dx
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[0]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[1]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[2]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    } else {
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[0]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[1]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tensors_[2]);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv_);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
      set(op_, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    }
    finalize(op_, "the convolution operation");
    if (ok()) graph_ = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph_, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op_);
    set(graph_, kOperationGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle_);
    finalize(graph_, "the operation graph");
  }
  ~CudnnConv() {
    for (cudnnBackendDescriptor_t d : {graph_, op_, conv_, tensors_[0], tensors_[1], tensors_[2]})
      if (d) api_.cudnnBackendDestroyDescriptor(d);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  bool ok() const { return status_ == CUDNN_STATUS_SUCCESS; }
  // Tensor t (0 x, 1 w, 2 y) as [n, c, s].
  const ConvDims& dims(int t) const { return dims_[t]; }
  // What failed while describing the convolution ("" when nothing did).
  const std::string& error() const { return error_; }

  // The engine configurations of every heuristic mode (instant, A, B, fallback), each once, in
  // the order the modes rank them; `why` is set on those that cannot be planned here.
  std::vector<CudnnEngine> engines() const {
    std::vector<CudnnEngine> out;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK}) {
      for (CudnnEngine& e : heuristic(mode)) {
        bool seen = false;
        for (const CudnnEngine& o : out) seen = seen || (o.index == e.index && o.knobs == e.knobs);
        if (seen) continue;
        Plan p = plan(e);
        e.workspace = p.workspace;
        e.why = p.why;
        destroy(p.plan);
        out.push_back(e);
      }
    }
    return out;
  }

  // An execution plan for engine e (owned by the caller: release it with destroy()); nullptr with
  // e's reason in `why` when cuDNN refuses it.
  struct Plan {
    cudnnBackendDescriptor_t plan = nullptr;
    long long workspace = 0;
    std::string why;
  };
  Plan plan(const CudnnEngine& e) const {
    Plan p;
    cudnnBackendDescriptor_t engine = nullptr, cfg = nullptr;
    std::vector<cudnnBackendDescriptor_t> knobs;
    auto fail = [&](const char* what, cudnnStatus_t s) {
      p.why = std::string(what) + ": " + api_.cudnnGetErrorString(s);
      return false;
    };
    auto step = [&](cudnnStatus_t s, const char* what) { return s == CUDNN_STATUS_SUCCESS || fail(what, s); };
    bool good = step(api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine), "engine") &&
                step(api_.cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_), "engine") &&
                step(api_.cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &e.index), "engine") &&
                step(api_.cudnnBackendFinalize(engine), "engine");
    for (const auto& [type, value] : e.knobs) {
      if (!good) break;
      cudnnBackendDescriptor_t k = nullptr;
      const cudnnBackendKnobType_t t = (cudnnBackendKnobType_t)type;
      good = step(api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k), "knob");
      if (k) knobs.push_back(k);
      good = good && step(api_.cudnnBackendSetAttribute(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &t), "knob") &&
             step(api_.cudnnBackendSetAttribute(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value), "knob") &&
             step(api_.cudnnBackendFinalize(k), "knob");
    }
    good = good && step(api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg), "engine config") &&
           step(api_.cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine), "engine config") &&
           (knobs.empty() || step(api_.cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                                (int64_t)knobs.size(), knobs.data()), "engine config")) &&
           step(api_.cudnnBackendFinalize(cfg), "engine config") &&
           step(api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p.plan), "plan") &&
           step(api_.cudnnBackendSetAttribute(p.plan, kExecutionPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle_), "plan") &&
           step(api_.cudnnBackendSetAttribute(p.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg), "plan") &&
           step(api_.cudnnBackendFinalize(p.plan), "plan");
    int64_t n = 0, ws = 0;
    good = good && step(api_.cudnnBackendGetAttribute(p.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws),
                        "plan workspace");
    p.workspace = ws;
    for (cudnnBackendDescriptor_t d : knobs) api_.cudnnBackendDestroyDescriptor(d);
    if (cfg) api_.cudnnBackendDestroyDescriptor(cfg);
    if (engine) api_.cudnnBackendDestroyDescriptor(engine);
    if (!good && p.plan) {
      api_.cudnnBackendDestroyDescriptor(p.plan);
      p.plan = nullptr;
    }
    return p;
  }
  void destroy(cudnnBackendDescriptor_t plan) const {
    if (plan) api_.cudnnBackendDestroyDescriptor(plan);
  }

  // y = conv(x, w) with x, w the pointers of slots 0 and 1 of a, all three laid out as described.
  cudnnStatus_t run(cudnnBackendDescriptor_t plan, const KernelArgs& a, float* y, void* workspace, cudaStream_t stream) const {
    cudnnStatus_t s = api_.cudnnSetStream(handle_, stream);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    cudnnBackendDescriptor_t pack = nullptr;
    s = api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    const int64_t uids[3] = {1, 2, 3};
    void* ptrs[3] = {a.ptr[0], a.ptr[1], y};
    s = api_.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (s == CUDNN_STATUS_SUCCESS) s = api_.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (s == CUDNN_STATUS_SUCCESS) s = api_.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (s == CUDNN_STATUS_SUCCESS) s = api_.cudnnBackendFinalize(pack);
    if (s == CUDNN_STATUS_SUCCESS) s = api_.cudnnBackendExecute(handle_, plan, pack);
    api_.cudnnBackendDestroyDescriptor(pack);
    return s;
  }

 private:
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    check(api_.cudnnBackendCreateDescriptor(type, &d), "creating a descriptor");
    return d;
  }
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
           const void* v) {
    if (ok()) check(api_.cudnnBackendSetAttribute(d, name, type, n, v), "setting an attribute");
  }
  void finalize(cudnnBackendDescriptor_t d, const char* what) {
    if (ok()) check(api_.cudnnBackendFinalize(d), what);
  }
  void check(cudnnStatus_t s, const std::string& what) {
    status_ = s;
    if (s != CUDNN_STATUS_SUCCESS) error_ = what + ": " + api_.cudnnGetErrorString(s);
  }
  // Tensor t (0 x, 1 w, 2 y) with unique id t + 1, aligned as its pointer will be (16 bytes:
  // torch's allocations, which the binding checks).
  void tensor(int t, const std::vector<long long>& sizes, const std::vector<long long>& strides) {
    tensors_[t] = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const cudnnDataType_t type = CUDNN_DATA_FLOAT;
    const int64_t uid = t + 1, align = 16;
    std::vector<int64_t> s(sizes.begin(), sizes.end()), st(strides.begin(), strides.end());
    set(tensors_[t], CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(tensors_[t], CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)s.size(), s.data());
    set(tensors_[t], CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)st.size(), st.data());
    set(tensors_[t], CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(tensors_[t], CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    finalize(tensors_[t], "a tensor");
  }

  // The engine configurations heuristic `mode` offers (none when it offers nothing or fails).
  std::vector<CudnnEngine> heuristic(cudnnBackendHeurMode_t mode) const {
    std::vector<CudnnEngine> out;
    cudnnBackendDescriptor_t heur = nullptr;
    if (api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) != CUDNN_STATUS_SUCCESS) return out;
    int64_t count = 0;
    std::vector<cudnnBackendDescriptor_t> cfgs;
    if (api_.cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph_) ==
            CUDNN_STATUS_SUCCESS &&
        api_.cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) == CUDNN_STATUS_SUCCESS &&
        api_.cudnnBackendFinalize(heur) == CUDNN_STATUS_SUCCESS &&
        api_.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr) ==
            CUDNN_STATUS_SUCCESS) {
      cfgs.assign((size_t)count, nullptr);
      for (auto& c : cfgs) api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c);
      if (api_.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                        cfgs.data()) != CUDNN_STATUS_SUCCESS)
        count = 0;
      for (int64_t i = 0; i < count && i < (int64_t)cfgs.size(); ++i) {
        CudnnEngine e;
        if (describe(cfgs[i], e)) out.push_back(e);
      }
    }
    for (cudnnBackendDescriptor_t c : cfgs)
      if (c) api_.cudnnBackendDestroyDescriptor(c);
    api_.cudnnBackendDestroyDescriptor(heur);
    return out;
  }

  // Engine index, knob choices and numerical notes of engine configuration cfg.
  bool describe(cudnnBackendDescriptor_t cfg, CudnnEngine& e) const {
    cudnnBackendDescriptor_t engine = nullptr;
    if (api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine) != CUDNN_STATUS_SUCCESS) return false;
    int64_t n = 0;
    bool good = api_.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine) ==
                    CUDNN_STATUS_SUCCESS &&
                api_.cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &e.index) ==
                    CUDNN_STATUS_SUCCESS;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    if (good && api_.cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                              CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS) {
      for (int64_t i = 0; i < n; ++i) {
        e.tensor_core = e.tensor_core || notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
        e.reduced = e.reduced || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                    notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
      }
    }
    api_.cudnnBackendDestroyDescriptor(engine);
    std::vector<cudnnBackendDescriptor_t> knobs(CUDNN_KNOB_TYPE_COUNTS, nullptr);
    for (auto& k : knobs) api_.cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k);
    int64_t count = 0;
    good = good && api_.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                 (int64_t)knobs.size(), &count, knobs.data()) == CUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; good && i < count; ++i) {
      cudnnBackendKnobType_t type;
      int64_t value = 0;
      good = api_.cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type) ==
                 CUDNN_STATUS_SUCCESS &&
             api_.cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value) ==
                 CUDNN_STATUS_SUCCESS;
      e.knobs.emplace_back((long long)type, (long long)value);
    }
    for (cudnnBackendDescriptor_t k : knobs)
      if (k) api_.cudnnBackendDestroyDescriptor(k);
    return good;
  }

  const Cudnn& api_;
  cudnnHandle_t handle_;
  ConvSpec spec_;
  ConvDims dims_[3];
  cudnnBackendDescriptor_t tensors_[3] = {nullptr, nullptr, nullptr};
  cudnnBackendDescriptor_t conv_ = nullptr, op_ = nullptr, graph_ = nullptr;
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
  std::string error_;
};

#ifdef FUSETUNE_CUDNN_LINKED
// The tuned engine configuration as the extension runs it. Construction checks that the cuDNN
// this process loaded is the one the engine was tuned with, plans it (cuDNN refusing it is an
// error) and allocates the workspace it needs, once; knobs is {count, type0, value0, type1,
// value1, ...}. Many fast engines need a workspace as large as the tensors (they change their
// layout in it), so it is sized by the engine rather than fixed per group. A channels-last
// convolution also allocates, once, its transposed x and w and its channels-last y.
class CudnnBaked {
 public:
  // Launches templates/conv_epilogue.cuh's to_channels_last_kernel over [n, c, s] (the caller is
  // nvcc-compiled code; this header is host C++).
  using Transpose = void (*)(const float* in, float* out, const ConvDims& d, cudaStream_t stream);

  CudnnBaked(const KernelArgs& a, const ConvSpec& spec, long long groups, unsigned long long engine,
             const unsigned long long* knobs, unsigned long long version, bool channels_last = false)
      : conv_(cudnn_linked(), handle(), a, spec, groups, channels_last), channels_last_(channels_last) {
    const Cudnn& api = cudnn_linked();
    if (api.cudnnGetVersion() != version)
      throw std::runtime_error("fusetune: this convolution was tuned with cuDNN " + std::to_string(version) +
                               " but the process loaded cuDNN " + std::to_string(api.cudnnGetVersion()) + "; run fusetune again");
    if (!conv_.ok()) throw std::runtime_error("fusetune: cuDNN cannot describe the convolution (" + conv_.error() + ")");
    CudnnEngine e;
    e.index = (long long)engine;
    for (unsigned long long i = 0; i < knobs[0]; ++i) e.knobs.emplace_back((long long)knobs[1 + 2 * i], (long long)knobs[2 + 2 * i]);
    const CudnnConv::Plan p = conv_.plan(e);
    if (!p.plan) throw std::runtime_error("fusetune: cuDNN refuses the tuned engine " + std::to_string(engine) + " (" + p.why + ")");
    plan_ = p.plan;
    allocate(&workspace_, p.workspace, "workspace of the tuned cuDNN engine");
    if (channels_last_)
      for (int t = 0; t < 3; ++t) allocate(&channels_last_copy_[t], conv_.dims(t).numel() * (long long)sizeof(float), "channels-last copies");
  }
  ~CudnnBaked() {
    conv_.destroy(plan_);
    for (void* p : {workspace_, channels_last_copy_[0], channels_last_copy_[1], channels_last_copy_[2]})
      if (p) cudaFree(p);
  }
  // y = conv(x, w) into y, channels-first and contiguous.
  void run(const KernelArgs& a, float* y, cudaStream_t stream) const { execute(a, y, stream); }
  // The channels-last convolution of the contiguous x and w of a: returns its channels-last y.
  const float* run_channels_last(const KernelArgs& a, Transpose transpose, cudaStream_t stream) const {
    if (!channels_last_) throw std::runtime_error("fusetune: the tuned convolution is not channels-last");
    KernelArgs t = a;
    for (int i = 0; i < 2; ++i) {
      t.ptr[i] = static_cast<float*>(channels_last_copy_[i]);
      transpose(a.ptr[i], t.ptr[i], conv_.dims(i), stream);
    }
    float* y = static_cast<float*>(channels_last_copy_[2]);
    execute(t, y, stream);
    return y;
  }

 private:
  static cudnnHandle_t handle() {  // one per process, on the device first used
    static cudnnHandle_t h = [] {
      cudnnHandle_t made = nullptr;
      if (cudnn_linked().cudnnCreate(&made) != CUDNN_STATUS_SUCCESS) throw std::runtime_error("fusetune: cudnnCreate failed");
      return made;
    }();
    return h;
  }
  static void allocate(void** p, long long bytes, const char* what) {
    if (bytes > 0 && cudaMalloc(p, (size_t)bytes) != cudaSuccess)
      throw std::runtime_error("fusetune: cannot allocate the " + std::to_string(bytes >> 20) + " MiB " + what);
  }
  void execute(const KernelArgs& a, float* y, cudaStream_t stream) const {
    for (const void* p : {(const void*)a.ptr[0], (const void*)a.ptr[1], (const void*)y})
      if ((unsigned long long)p % 16)
        throw std::runtime_error("fusetune: the convolution's tensors must be 16-byte aligned (as torch allocates them)");
    const cudnnStatus_t s = conv_.run(plan_, a, y, workspace_, stream);
    if (s != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("fusetune: cuDNN failed running the convolution: ") + cudnn_linked().cudnnGetErrorString(s));
  }
  CudnnConv conv_;
  bool channels_last_;
  cudnnBackendDescriptor_t plan_ = nullptr;
  void* workspace_ = nullptr;
  void* channels_last_copy_[3] = {nullptr, nullptr, nullptr};  // x, w, y
};
#endif

}  // namespace fusetune
