// Does cuDNN fuse a convolution's epilogue on fp32 data? Issue 4 needs conv2d_relu_bias'
// relu(conv(x, w) + b) + b2 in one pass (the separate epilogue pass costs a third of its time).
// For that model's shape, in four layouts (channels-first, channels-last, and either of them in
// with the other out), this lists every engine configuration cuDNN's heuristics
// (instant, A, B, fallback) offer for the convolution alone and for the fused graph (conv -> add
// b -> relu -> add b2, the intermediates virtual), plans and times each, and checks each fused
// result against the best plain convolution plus a CUDA epilogue kernel.
//   nvcc -O2 -std=c++17 -arch=sm_90 -o probe cudnn_fusion_probe.cu -lcudnn && ./probe
// (tests/gpu/bench/run.sh builds it against the cuDNN that PyTorch loads.)
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const int64_t N = 32, C = 32, H = 256, W = 256, K = 64, R = 3, S = 3, PAD = 1;

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// A status check that remembers the first failure: graph building stops at the first error.
struct Status {
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  std::string what;
  bool ok() const { return s == CUDNN_STATUS_SUCCESS; }
  void operator()(cudnnStatus_t r, const char* w) {
    if (ok() && r != CUDNN_STATUS_SUCCESS) {
      s = r;
      what = std::string(w) + ": " + cudnnGetErrorString(r);
    }
  }
};

cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t t, Status& st) {
  cudnnBackendDescriptor_t d = nullptr;
  st(cudnnBackendCreateDescriptor(t, &d), "create");
  return d;
}

// dims/strides of an [n, c, h, w] tensor, channels-first or channels-last in memory.
std::vector<int64_t> strides_of(const std::vector<int64_t>& d, bool nhwc) {
  if (!nhwc) return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

cudnnBackendDescriptor_t tensor(int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, bool virt,
                                Status& st) {
  cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, st);
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int64_t align = 16;
  st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type), "tensor type");
  st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data()), "tensor dims");
  st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()), "tensor strides");
  st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), "tensor uid");
  st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align), "tensor alignment");
  if (virt) {
    const bool v = true;
    st(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v), "tensor virtual");
  }
  st(cudnnBackendFinalize(t), "tensor");
  return t;
}

// y = mode(x[, b]) as a pointwise operation.
cudnnBackendDescriptor_t pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                   cudnnBackendDescriptor_t y, Status& st) {
  cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, st);
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  st(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode), "pointwise mode");
  st(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec), "pointwise precision");
  st(cudnnBackendFinalize(pw), "pointwise");
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw), "op pw");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x), "op x");
  if (b) st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b), "op b");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y), "op y");
  st(cudnnBackendFinalize(op), "pointwise operation");
  return op;
}

struct Engine {
  int64_t index = -1;
  std::vector<std::pair<cudnnBackendKnobType_t, int64_t>> knobs;
  bool tensor_core = false, down_convert = false, runtime_compiled = false;
  std::string modes;  // heuristic modes that offered it
};

// The operation graph: the convolution alone (y uid 5) or fused with its epilogue (z uid 5);
// x and w in one layout, y and z in another (out_nhwc).
cudnnBackendDescriptor_t build(cudnnHandle_t handle, bool fused, bool nhwc, bool out_nhwc, Status& st) {
  const std::vector<int64_t> xd = {N, C, H, W}, wd = {K, C, R, S}, yd = {N, K, H, W}, bd = {1, K, 1, 1};
  cudnnBackendDescriptor_t x = tensor(1, xd, strides_of(xd, nhwc), false, st);
  cudnnBackendDescriptor_t w = tensor(2, wd, strides_of(wd, nhwc), false, st);
  cudnnBackendDescriptor_t y = tensor(fused ? 10 : 5, yd, strides_of(yd, out_nhwc), fused, st);
  cudnnBackendDescriptor_t conv = make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, st);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2, one[2] = {1, 1}, pad[2] = {PAD, PAD};
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad), "conv");
  st(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one), "conv");
  st(cudnnBackendFinalize(conv), "conv");
  const float alpha = 1.f, beta = 0.f;
  cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x), "fprop");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w), "fprop");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y), "fprop");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv), "fprop");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha), "fprop");
  st(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta), "fprop");
  st(cudnnBackendFinalize(op), "fprop");
  std::vector<cudnnBackendDescriptor_t> ops = {op};
  if (fused) {
    cudnnBackendDescriptor_t b = tensor(3, bd, strides_of(bd, nhwc), false, st);
    cudnnBackendDescriptor_t b2 = tensor(4, bd, strides_of(bd, nhwc), false, st);
    cudnnBackendDescriptor_t t1 = tensor(11, yd, strides_of(yd, out_nhwc), true, st);
    cudnnBackendDescriptor_t t2 = tensor(12, yd, strides_of(yd, out_nhwc), true, st);
    cudnnBackendDescriptor_t z = tensor(5, yd, strides_of(yd, out_nhwc), false, st);
    ops.push_back(pointwise(CUDNN_POINTWISE_ADD, y, b, t1, st));
    ops.push_back(pointwise(CUDNN_POINTWISE_RELU_FWD, t1, nullptr, t2, st));
    ops.push_back(pointwise(CUDNN_POINTWISE_ADD, t2, b2, z, st));
  }
  cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(), ops.data()),
     "graph ops");
  st(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle), "graph handle");
  st(cudnnBackendFinalize(graph), "graph");
  return graph;  // the descriptors it refers to are left to the process's end (a probe)
}

void describe(cudnnBackendDescriptor_t cfg, Engine& e) {
  Status st;
  int64_t n = 0;
  cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, st);
  st(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine), "cfg engine");
  st(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &e.index), "engine index");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                               &n, notes) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i) {
      e.tensor_core |= notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
      e.down_convert |= notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    }
  cudnnBackendBehaviorNote_t behaviour[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n,
                               behaviour) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < n; ++i) e.runtime_compiled |= behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  std::vector<cudnnBackendDescriptor_t> knobs(CUDNN_KNOB_TYPE_COUNTS, nullptr);
  for (auto& k : knobs) cudnnBackendCreateDescriptor(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k);
  int64_t count = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)knobs.size(), &count,
                               knobs.data()) == CUDNN_STATUS_SUCCESS)
    for (int64_t i = 0; i < count; ++i) {
      cudnnBackendKnobType_t type;
      int64_t value = 0;
      cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type);
      cudnnBackendGetAttribute(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value);
      e.knobs.emplace_back(type, value);
    }
}

std::vector<Engine> engines(cudnnBackendDescriptor_t graph) {
  std::vector<Engine> out;
  const std::pair<cudnnBackendHeurMode_t, const char*> modes[] = {
      {CUDNN_HEUR_MODE_INSTANT, "I"}, {CUDNN_HEUR_MODE_A, "A"}, {CUDNN_HEUR_MODE_B, "B"}, {CUDNN_HEUR_MODE_FALLBACK, "F"}};
  for (const auto& [mode, tag] : modes) {
    Status st;
    cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, st);
    st(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph), "heur graph");
    st(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode), "heur mode");
    st(cudnnBackendFinalize(heur), "heuristic");
    int64_t count = 0;
    st(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr), "heur count");
    std::vector<cudnnBackendDescriptor_t> cfgs((size_t)count, nullptr);
    for (auto& c : cfgs) cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c);
    if (count > 0)
      st(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, cfgs.data()),
         "heur results");
    std::printf("    heuristic %s: %s, %lld configurations\n", tag, st.ok() ? "ok" : st.what.c_str(), (long long)count);
    for (int64_t i = 0; st.ok() && i < count; ++i) {
      Engine e;
      describe(cfgs[i], e);
      auto same = std::find_if(out.begin(), out.end(), [&](const Engine& o) { return o.index == e.index && o.knobs == e.knobs; });
      if (same != out.end()) {
        same->modes += tag;
        continue;
      }
      e.modes = tag;
      out.push_back(e);
    }
  }
  return out;
}

cudnnBackendDescriptor_t plan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph, const Engine& e, int64_t& workspace, Status& st) {
  cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph), "engine graph");
  st(cudnnBackendSetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &e.index), "engine index");
  st(cudnnBackendFinalize(engine), "engine");
  std::vector<cudnnBackendDescriptor_t> knobs;
  for (const auto& [type, value] : e.knobs) {
    cudnnBackendDescriptor_t k = make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, st);
    st(cudnnBackendSetAttribute(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type), "knob type");
    st(cudnnBackendSetAttribute(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value), "knob value");
    st(cudnnBackendFinalize(k), "knob");
    knobs.push_back(k);
  }
  cudnnBackendDescriptor_t cfg = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine), "cfg engine");
  if (!knobs.empty())
    st(cudnnBackendSetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)knobs.size(), knobs.data()),
       "cfg knobs");
  st(cudnnBackendFinalize(cfg), "engine config");
  cudnnBackendDescriptor_t p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, st);
  st(cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle), "plan handle");
  st(cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg), "plan config");
  st(cudnnBackendFinalize(p), "plan");
  int64_t n = 0;
  workspace = 0;
  st(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &workspace), "workspace size");
  return p;
}

cudnnStatus_t execute(cudnnHandle_t handle, cudnnBackendDescriptor_t p, bool fused, void* const* ptrs, void* workspace) {
  Status st;
  cudnnBackendDescriptor_t pack = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, st);
  const int64_t uids[5] = {1, 2, 5, 3, 4};
  const int64_t n = fused ? 5 : 3;
  st(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids), "pack uids");
  st(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs), "pack pointers");
  st(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace), "pack workspace");
  st(cudnnBackendFinalize(pack), "pack");
  if (st.ok()) st(cudnnBackendExecute(handle, p, pack), "execute");
  cudnnBackendDestroyDescriptor(pack);
  return st.s;
}

__global__ void fill(float* p, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = scale * ((h & 0xffffff) / 16777216.f - 0.5f);
  }
}

// z = relu(y + b[c]) + b2[c], c the channel of element i in the layout.
__global__ void epilogue(const float* y, const float* b, const float* b2, float* z, long long n, bool nhwc) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long c = nhwc ? i % K : (i / (H * W)) % K;
    z[i] = fmaxf(y[i] + b[c], 0.f) + b2[c];
  }
}

__global__ void max_abs_diff(const float* a, const float* b, long long n, float* out) {
  float m = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    m = fmaxf(m, fabsf(a[i] - b[i]));
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));  // non-negative floats order as ints
}

float time_ms(cudnnHandle_t handle, cudnnBackendDescriptor_t p, bool fused, void* const* ptrs, void* ws) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < 13; ++i) {
    CK(cudaEventRecord(a));
    if (execute(handle, p, fused, ptrs, ws) != CUDNN_STATUS_SUCCESS) return -1.f;
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0.f;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms);  // three warm-up runs
    if (i == 0 && ms > 10.f) return ms;  // a slow engine: its first run says enough
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  cudnnHandle_t handle;
  if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) {
    std::printf("cudnnCreate failed\n");
    return 1;
  }
  std::printf("cuDNN %zu; conv2d_relu_bias: x %lldx%lldx%lldx%lld, w %lldx%lldx%lldx%lld, pad %lld, fp32 data\n", cudnnGetVersion(),
              (long long)N, (long long)C, (long long)H, (long long)W, (long long)K, (long long)C, (long long)R, (long long)S,
              (long long)PAD);
  const long long nx = N * C * H * W, nw = K * C * R * S, ny = N * K * H * W;
  float *x, *w, *b, *b2, *y, *z, *diff;
  CK(cudaMalloc(&x, nx * 4));
  CK(cudaMalloc(&w, nw * 4));
  CK(cudaMalloc(&b, K * 4));
  CK(cudaMalloc(&b2, K * 4));
  CK(cudaMalloc(&y, ny * 4));
  CK(cudaMalloc(&z, ny * 4));
  CK(cudaMalloc(&diff, 4));
  fill<<<1024, 256>>>(x, nx, 1u, 2.f);
  fill<<<1024, 256>>>(w, nw, 2u, 0.2f);
  fill<<<1, 64>>>(b, K, 3u, 0.5f);
  fill<<<1, 64>>>(b2, K, 4u, 0.5f);
  CK(cudaDeviceSynchronize());
  // Layouts (in, out): both channels-first, both channels-last, channels-last in with a
  // channels-first result (the model's output layout without a transpose after the fused graph),
  // and channels-first in with a channels-last result (no transpose of x before it); the mixed
  // ones are checked against the reference of their result's layout.
  float *ref_nchw = nullptr, *ref_nhwc = nullptr;
  CK(cudaMalloc(&ref_nchw, ny * 4));
  CK(cudaMalloc(&ref_nhwc, ny * 4));
  const std::pair<bool, bool> layouts[] = {{false, false}, {true, true}, {true, false}, {false, true}};
  for (const auto& [nhwc, out_nhwc] : layouts) {
    float best_conv = 1e30f;
    const bool mixed = nhwc != out_nhwc;
    for (bool fused : {false, true}) {
      std::printf("%s -> %s, %s:\n", nhwc ? "channels-last" : "channels-first", out_nhwc ? "channels-last" : "channels-first",
                  fused ? "conv + add + relu + add (fused graph)" : "conv alone");
      Status st;
      cudnnBackendDescriptor_t graph = build(handle, fused, nhwc, out_nhwc, st);
      if (!st.ok()) {
        std::printf("    graph refused: %s\n", st.what.c_str());
        continue;
      }
      for (const Engine& e : engines(graph)) {
        int64_t ws_bytes = 0;
        Status ps;
        cudnnBackendDescriptor_t p = plan(handle, graph, e, ws_bytes, ps);
        std::printf("    engine %3lld (%s)%s%s%s knobs %zu: ", (long long)e.index, e.modes.c_str(), e.tensor_core ? " tensor-core" : "",
                    e.down_convert ? " down-convert" : "", e.runtime_compiled ? " runtime-compiled" : "", e.knobs.size());
        if (!ps.ok()) {
          std::printf("not planned (%s)\n", ps.what.c_str());
          continue;
        }
        void* ws = nullptr;
        if (ws_bytes > 0 && cudaMalloc(&ws, ws_bytes) != cudaSuccess) {
          cudaGetLastError();
          std::printf("workspace of %lld MiB not available\n", (long long)(ws_bytes >> 20));
          continue;
        }
        void* ptrs[5] = {x, w, fused ? (void*)z : (void*)y, b, b2};
        const float ms = time_ms(handle, p, fused, ptrs, ws);
        if (ms < 0) {
          std::printf("execution failed\n");
        } else if (!fused) {
          std::printf("%.4f ms, workspace %lld MiB\n", ms, (long long)(ws_bytes >> 20));
          if (!mixed && !e.down_convert && ms < best_conv) {  // the reference: the best full-precision plain conv, then the epilogue
            best_conv = ms;
            epilogue<<<4096, 256>>>(y, b, b2, nhwc ? ref_nhwc : ref_nchw, ny, nhwc);
          }
        } else {
          CK(cudaMemset(diff, 0, 4));
          max_abs_diff<<<4096, 256>>>(z, out_nhwc ? ref_nhwc : ref_nchw, ny, diff);
          float d = 0.f;
          CK(cudaMemcpy(&d, diff, 4, cudaMemcpyDeviceToHost));
          std::printf("%.4f ms, workspace %lld MiB, max |z - ref| %.3g\n", ms, (long long)(ws_bytes >> 20), d);
        }
        CK(cudaDeviceSynchronize());
        if (ws) cudaFree(ws);
        cudnnBackendDestroyDescriptor(p);
      }
    }
  }
  cudnnDestroy(handle);
  return 0;
}
