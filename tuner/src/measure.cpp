// The measuring worker: correctness check against PyTorch's reference, then timing, per
// ../shared/MEASURE.md: NaN-poisoned outputs, L2 flushed before every timed run, one event pair
// per run, median and quantiles with the raw samples kept.
#include "measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>

#include "compile.h"
#include "cublaslt.h"
#include "cudnn_group.h"
#include "driver.h"
#include "error.h"
#include "families.h"
#include "plan.h"
#include "tma_map.h"
#include "util.h"

namespace fusetune {

namespace {

struct CheckStats {  // mirrors templates/check.cuh
  unsigned long long n_bad;
  unsigned long long first_bad;
  double sum_sq_diff;
  double sum_sq_ref;
  float max_abs_err;
  float pad;
};

// MEASURE.md's norm check (relative L2 error <= rtol) catches a kernel that returns zeros where
// the reference is mostly zeros. A reference whose RMS is a thousandth of atol or less is all
// below what the tolerance resolves (e.g. the mean of a normalised tensor: rounding noise around
// 0), where any two correct implementations differ by 100%; there the elementwise check decides.
bool norm_resolvable(double sum_sq_ref, long long n, double atol) {
  return n > 0 && std::sqrt(sum_sq_ref / (double)n) > 1e-3 * atol;
}

void emit(const std::string& kind, const json& j) {
  std::printf("%s %s\n", kind.c_str(), j.dump().c_str());
  std::fflush(stdout);
}

struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { CU_CHECK(cuMemAlloc_v2(&ptr, std::max<size_t>(n, 4))); }
  ~DeviceBuffer() { if (ptr) Driver::get().cuMemFree_v2(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

class Worker {
 public:
  explicit Worker(const json& job) : job_(job), group_(Group::from_json(job.at("group"))) {}

  void setup();
  void run_candidate(const json& cand);

 private:
  // The recorded tensor `value` on the device, as the slot's `dtype` (bool becomes float 0 / 1).
  std::unique_ptr<DeviceBuffer> upload(const std::string& value, const std::string& dtype);
  json check_outputs();
  double measure_bandwidth();
  // The grid candidate `cand` runs with (computed once, before it is timed), and the bytes of the
  // workspace its split tail needs ({"split_tail": ...}, templates/gemm_tma_split.h).
  std::vector<unsigned> grid_of(CUfunction f, const json& cand, const KernelArgs& args, long long& split_bytes);
  // `split_ws`: the last parameter of a kernel with {"split_tail": ...}.
  CUresult launch(CUfunction f, const json& cand, const std::vector<unsigned>& grid, const KernelArgs& args,
                  const std::vector<TmaMap>& maps, CUdeviceptr split_ws, CUstream stream);
  // The library part of a candidate (cuBLASLt or cuDNN), writing to `out`: returns how to run
  // it, or sets `unavailable` / throws.
  std::function<CUresult(CUstream)> library_run(const json& cand, float* out, json& result, std::string& unavailable);
  std::function<CUresult(CUstream)> cublaslt_run(const json& call, float* out, json& result, std::string& unavailable);
  void setup_cublaslt();
  std::string library_error() const;
  // Compiles (through the cache) and loads kernel `name` of `source`.
  CUfunction load_kernel(const std::string& source, const std::string& name);
  CUresult transpose_channels_last(const float* in, float* out, const ConvDims& d, CUstream stream);

  json job_;
  Group group_;
  DeviceInfo dev_;
  std::map<std::string, std::unique_ptr<DeviceBuffer>> inputs_;
  std::vector<std::unique_ptr<DeviceBuffer>> outputs_, refs_;
  std::vector<float*> slot_base_;
  std::unique_ptr<DeviceBuffer> flush_, stats_;
  std::map<std::string, CUfunction> check_fns_;  // output dtype -> templates/check.cuh's kernel for it
  CUfunction transpose_fn_ = nullptr;
  KernelArgs args_{};
  double best_ms_ = -1.0;
  // cuBLASLt (loaded only when a candidate calls it): handle, workspace, the product buffer of
  // candidates with an epilogue pass (made when the first one comes), and per compute mode (TF32
  // or not) the product's description and the heuristic's algorithms.
  struct LtMode {
    std::unique_ptr<LtGemm> gemm;
    std::vector<cublasLtMatmulHeuristicResult_t> algos;
  };
  const CublasLt* lt_ = nullptr;
  cublasLtHandle_t lt_handle_ = nullptr;
  std::unique_ptr<DeviceBuffer> lt_workspace_, product_;
  std::map<bool, LtMode> lt_modes_;
  cublasStatus_t lt_status_ = CUBLAS_STATUS_SUCCESS;
  std::unique_ptr<CudnnGroup> dnn_;  // made when the first cuDNN candidate comes
};

// The library call of a candidate (null when it has none); its output_slot is < 0 when the
// library writes a product buffer that the candidate's kernel (its epilogue pass) then reads.
const json* library_call_of(const json& cand) {
  for (const char* name : {"cublaslt", "cudnn"})
    if (cand.contains(name)) return &cand.at(name);
  return nullptr;
}

void Worker::setup_cublaslt() {
  lt_ = &cublaslt_api(job_.value("cublaslt_path", ""));
  if (lt_->cublasLtCreate(&lt_handle_) != CUBLAS_STATUS_SUCCESS) FT_THROW("cublasLtCreate failed");
  lt_workspace_ = std::make_unique<DeviceBuffer>(kCublasLtWorkspaceBytes);
}

// cuBLASLt's description of an algorithm, for the reader of best.json.
json algo_config(const CublasLt& lt, const cublasLtMatmulAlgo_t& algo) {
  const std::pair<const char*, cublasLtMatmulAlgoConfigAttributes_t> attrs[] = {
      {"id", CUBLASLT_ALGO_CONFIG_ID},           {"tile", CUBLASLT_ALGO_CONFIG_TILE_ID},
      {"stages", CUBLASLT_ALGO_CONFIG_STAGES_ID}, {"split_k", CUBLASLT_ALGO_CONFIG_SPLITK_NUM},
      {"reduction", CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME}, {"swizzle", CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING},
      {"custom", CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION}, {"cluster_shape", CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID}};
  json out = json::object();
  for (const auto& [name, attr] : attrs) {
    size_t size = 0;
    if (lt.cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS || size > 8) continue;
    uint64_t v = 0;
    if (lt.cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, size, &size) != CUBLAS_STATUS_SUCCESS) continue;
    out[name] = size == 4 ? json((int32_t)(uint32_t)v) : json(v);  // e.g. split_k -1 (int32)
  }
  return out;
}

std::function<CUresult(CUstream)> Worker::library_run(const json& cand, float* out, json& result, std::string& unavailable) {
  if (cand.contains("cublaslt")) return cublaslt_run(cand.at("cublaslt"), out, result, unavailable);
  const json& c = cand.at("cudnn");
  if (!dnn_)
    dnn_ = std::make_unique<CudnnGroup>(job_.value("cudnn_path", ""), group_, args_,
                                        [this](const float* in, float* to, const ConvDims& d, CUstream stream) {
                                          return transpose_channels_last(in, to, d, stream);
                                        });
  json library;
  auto run = dnn_->prepare(c.at("tf32").get<bool>(), c.at("layout").get<int>(), c.at("engine").get<int>(), out, library,
                           unavailable);
  if (!library.is_null()) result["library"] = library;
  return run;
}

std::string Worker::library_error() const {
  if (lt_status_ != CUBLAS_STATUS_SUCCESS) return "cuBLASLt status " + std::to_string((int)lt_status_);
  return dnn_ ? dnn_->error() : "";
}

std::function<CUresult(CUstream)> Worker::cublaslt_run(const json& c, float* out, json& result, std::string& unavailable) {
  if (!lt_) setup_cublaslt();
  const bool tf32 = c.at("tf32").get<bool>();
  const int index = c.at("algo").get<int>();
  const int bias_slot = c.at("bias_slot").get<int>();
  const float* bias = bias_slot >= 0 ? args_.ptr[bias_slot] : nullptr;
  const std::string dtype = c.value("dtype", "float32");  // of the operands, the bias and the product
  LtMode& mode = lt_modes_[tf32];  // the group's epilogue and types are the same for every candidate
  if (!mode.gemm) {
    mode.gemm = std::make_unique<LtGemm>(*lt_, args_, tf32, (cublasLtEpilogue_t)c.at("epilogue").get<int>(),
                                          lt_data_type(dtype));
    if (mode.gemm->status() != CUBLAS_STATUS_SUCCESS)
      FT_THROW("cuBLASLt cannot describe this product (status " + std::to_string((int)mode.gemm->status()) + ")");
    mode.algos.resize(64);
    mode.algos.resize(mode.gemm->heuristic(lt_handle_, args_, out, mode.algos.data(), (int)mode.algos.size()));
  }
  const auto& gemm = mode.gemm;
  const auto& algos = mode.algos;
  if (index >= (int)algos.size()) {
    unavailable = "cuBLASLt's heuristic offers " + std::to_string(algos.size()) + " algorithms for this product";
    return nullptr;
  }
  const cublasLtMatmulHeuristicResult_t& h = algos[index];
  json data = json::array();
  for (uint64_t w : h.algo.data) data.push_back(hex64(w));
  const int alignment = gemm->alignment(args_, out);
  const size_t version = lt_->cublasLtGetVersion();
  result["library"] = {{"name", "cublaslt"}, {"version", version}, {"compute", tf32 ? "tf32" : "fp32"},
                       {"dtype", dtype},
                       {"epilogue", c.at("epilogue_name")},
                       {"heuristic_rank", index}, {"workspace_bytes", h.workspaceSize}, {"waves", h.wavesCount},
                       {"config", algo_config(*lt_, h.algo)},
                       {"constants", {{"ALGO_DATA", data}, {"CUBLASLT_VERSION", version}, {"ALIGNMENT", alignment}}}};
  const LtGemm* g = gemm.get();
  const cublasLtMatmulAlgo_t algo = h.algo;
  void* ws = reinterpret_cast<void*>(lt_workspace_->ptr);
  return [this, g, algo, out, bias, ws](CUstream stream) {
    lt_status_ = g->run(lt_handle_, args_, out, bias, algo, ws, kCublasLtWorkspaceBytes, (cudaStream_t)stream);
    return lt_status_ == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
  };
}

std::unique_ptr<DeviceBuffer> Worker::upload(const std::string& value, const std::string& dtype) {
  const json& info = job_.at("tensor_index").at(value);
  const std::string data = as_slot_dtype(
      read_file(path_join(job_.at("tensors_dir").get<std::string>(), info.at("file").get<std::string>())),
      info.value("dtype", ""), dtype);
  auto buf = std::make_unique<DeviceBuffer>(data.size());
  CU_CHECK(cuMemcpyHtoD_v2(buf->ptr, data.data(), data.size()));
  return buf;
}

void Worker::setup() {
  CUdevice dev;
  CU_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU_CHECK(cuCtxSetCurrent(ctx));
  dev_ = query_device(0);
  for (const Slot& s : group_.slots) {
    if (s.access == Access::Output) {
      // The value's own size: a slot may view it with repeats (a row group's per-row output).
      int64_t n = -1;
      for (const GroupOutput& o : group_.outputs)
        if (o.value == s.layout.base) n = Layout::contiguous("", o.shape).numel();
      FT_CHECK(n >= 0, "output slot " + s.layout.base + " is not an output of " + group_.id);
      const size_t bytes = (size_t)n * dtype_bytes(s.dtype);
      outputs_.push_back(std::make_unique<DeviceBuffer>(bytes));
      refs_.push_back(upload(s.layout.base, s.dtype));
      if (refs_.back()->bytes != bytes) FT_THROW("reference of " + s.layout.base + " has the wrong size");
      slot_base_.push_back(reinterpret_cast<float*>(outputs_.back()->ptr));
    } else {
      if (!inputs_.count(s.layout.base)) inputs_[s.layout.base] = upload(s.layout.base, s.dtype);
      slot_base_.push_back(reinterpret_cast<float*>(inputs_[s.layout.base]->ptr));
    }
  }
  args_ = kernel_args(group_, slot_base_);
  flush_ = std::make_unique<DeviceBuffer>((size_t)std::max(dev_.l2_bytes, 1 << 20) * 2);
  stats_ = std::make_unique<DeviceBuffer>(sizeof(CheckStats));

  for (const GroupOutput& o : group_.outputs)
    if (o.dtype != "int64" && !check_fns_.count(o.dtype))
      check_fns_[o.dtype] = load_kernel("#include \"check.cuh\"\n", o.dtype == "float32" ? "fusetune_check" : "fusetune_check_" + o.dtype);
  if (job_.contains("best_ms") && job_.at("best_ms").is_number()) best_ms_ = job_.at("best_ms").get<double>();

  json device = {{"name", dev_.name},
                 {"compute_capability", std::to_string(dev_.cc_major) + "." + std::to_string(dev_.cc_minor)},
                 {"sm_count", dev_.sm_count},
                 {"l2_bytes", dev_.l2_bytes},
                 {"clock_khz", dev_.clock_khz},
                 {"driver_version", dev_.driver_version},
                 {"fp32_peak_tflops", dev_.fp32_peak_flops() / 1e12},
                 {"tf32_peak_tflops", dev_.tf32_peak_flops() / 1e12},
                 {"half_peak_tflops", dev_.half_peak_flops() / 1e12},
                 {"copy_bandwidth_gbps", measure_bandwidth()}};
  emit("ready", json{{"device", device}});
}

CUfunction Worker::load_kernel(const std::string& source, const std::string& name) {
  const json& c = job_.at("compile");
  Compiler compiler(c.at("include_dirs").get<std::vector<std::string>>(), c.at("arch").get<std::string>(),
                    c.at("cache_dir").get<std::string>());
  const CompileResult r = compiler.compile(CompileJob{name, source, name, ""});
  if (!r.ok) FT_THROW("the kernel " + name + " does not compile: " + r.log);
  const std::string cubin = read_file(r.cubin_path);
  CUmodule module = nullptr;  // kept loaded for the worker's life
  CUfunction f = nullptr;
  CU_CHECK(cuModuleLoadData(&module, cubin.data()));
  CU_CHECK(cuModuleGetFunction(&f, module, r.lowered_name.c_str()));
  return f;
}

CUresult Worker::transpose_channels_last(const float* in, float* out, const ConvDims& d, CUstream stream) {
  if (!transpose_fn_) transpose_fn_ = load_kernel("#include \"conv_epilogue.cuh\"\n", "fusetune::to_channels_last_kernel<float>");
  const LaunchDims l = channels_last_launch(d);
  long long c = d.c, s = d.s;
  void* params[] = {&in, &out, &c, &s};
  return Driver::get().cuLaunchKernel(transpose_fn_, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                                      l.shared_bytes, stream, params, nullptr);
}

// Device-to-device copy rate (bytes read + written), the memory roofline for this machine.
double Worker::measure_bandwidth() {
  const size_t bytes = (size_t)1 << 30;
  DeviceBuffer a(bytes), b(bytes);
  CUevent e0, e1;
  CU_CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU_CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  std::vector<double> ms;
  for (int i = 0; i < 8; ++i) {
    CU_CHECK(cuEventRecord(e0, nullptr));
    CU_CHECK(cuMemcpyDtoDAsync_v2(b.ptr, a.ptr, bytes, nullptr));
    CU_CHECK(cuEventRecord(e1, nullptr));
    CU_CHECK(cuEventSynchronize(e1));
    float t = 0;
    CU_CHECK(cuEventElapsedTime(&t, e0, e1));
    if (i >= 2) ms.push_back(t);
  }
  Driver::get().cuEventDestroy_v2(e0);
  Driver::get().cuEventDestroy_v2(e1);
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

// A persistent kernel loops over its work with no more blocks than are resident at once: one per
// SM, in whole clusters where it runs in clusters of {"cluster": n} blocks along x (as many as
// the driver says fit; the SMs of a cluster share a GPC, so some SMs may be left over). The TMA
// GEMM's ({"split_tail": {"bm", "bn", "k_tile"?}}) is gemm_tma_grid's, as in the extension.
std::vector<unsigned> Worker::grid_of(CUfunction f, const json& cand, const KernelArgs& args, long long& split_bytes) {
  split_bytes = 0;
  auto g = cand.at("grid").get<std::vector<unsigned>>();
  if (!cand.value("persistent", false)) return g;
  const int cluster = cand.value("cluster", 1);
  int resident = std::max(dev_.sm_count, 1);
  if (cluster > 1) {
    const auto b = cand.at("block").get<std::vector<unsigned>>();
    CUlaunchConfig config{};
    config.gridDimX = g[0], config.gridDimY = g[1], config.gridDimZ = g[2];
    config.blockDimX = b[0], config.blockDimY = b[1], config.blockDimZ = b[2];
    config.sharedMemBytes = cand.at("shared_bytes").get<unsigned>();
    int clusters = 0;
    if (Driver::get().cuOccupancyMaxActiveClusters(&clusters, f, &config) != CUDA_SUCCESS || clusters < 1)
      clusters = std::max(dev_.sm_count / cluster, 1);
    resident = clusters * cluster;
  }
  if (cand.contains("split_tail")) {
    const json& t = cand.at("split_tail");
    const GemmTmaGrid grid =
        gemm_tma_grid(t.at("bm").get<int>(), t.at("bn").get<int>(), cluster, args.m, args.n, args.k, args.batch, resident,
                      t.value("k_tile", 32));
    g[0] = grid.blocks;
    split_bytes = grid.workspace_bytes;
    return g;
  }
  g[0] = std::min<unsigned>(g[0], (unsigned)resident);
  return g;
}

CUresult Worker::launch(CUfunction f, const json& cand, const std::vector<unsigned>& g, const KernelArgs& args,
                        const std::vector<TmaMap>& maps, CUdeviceptr split_ws, CUstream stream) {
  const auto b = cand.at("block").get<std::vector<unsigned>>();
  KernelArgs a = args;
  std::vector<void*> params = {&a};  // then the tensor maps, further __grid_constant__ parameters
  for (const TmaMap& map : maps) params.push_back(const_cast<TmaMap*>(&map));  // only read
  if (cand.contains("split_tail")) params.push_back(&split_ws);
  if (cand.value("cooperative", false))  // {"cooperative": true}: every block resident at once, or an error
    return Driver::get().cuLaunchCooperativeKernel(f, g[0], g[1], g[2], b[0], b[1], b[2],
                                                   cand.at("shared_bytes").get<unsigned>(), stream, params.data());
  return Driver::get().cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], cand.at("shared_bytes").get<unsigned>(),
                                      stream, params.data(), nullptr);
}

json Worker::check_outputs() {
  const float atol = job_.at("atol").get<float>(), rtol = job_.at("rtol").get<float>();
  json per_output = json::array();
  bool ok = true;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (group_.outputs[o].dtype == "int64") {  // integers must match exactly (outputs_ is in output order)
      const size_t n = outputs_[o]->bytes / 8;
      std::vector<long long> got(n), want(n);
      CU_CHECK(cuMemcpyDtoH_v2(got.data(), outputs_[o]->ptr, n * 8));
      CU_CHECK(cuMemcpyDtoH_v2(want.data(), refs_[o]->ptr, n * 8));
      size_t bad = 0, first = n;
      for (size_t i = 0; i < n; ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      json r = {{"value", group_.outputs[o].value}, {"mismatches", bad}};
      if (bad) r["first_mismatch"] = {{"index", first}, {"out", got[first]}, {"ref", want[first]}};
      ok = ok && bad == 0;
      per_output.push_back(r);
      continue;
    }
    CheckStats init{0, ~0ULL, 0.0, 0.0, 0.f, 0.f};
    CU_CHECK(cuMemcpyHtoD_v2(stats_->ptr, &init, sizeof init));
    const std::string& dtype = group_.outputs[o].dtype;
    const size_t element = (size_t)dtype_bytes(dtype);
    long long n = (long long)(outputs_[o]->bytes / element);
    CUdeviceptr out = outputs_[o]->ptr, ref = refs_[o]->ptr, st = stats_->ptr;
    float fa = atol, fr = rtol;
    void* params[] = {&out, &ref, &n, &fa, &fr, &st};
    const unsigned blocks = (unsigned)std::min<long long>(std::max<long long>(ceil_div(n, 256), 1), 4096);
    CU_CHECK(cuLaunchKernel(check_fns_.at(dtype), blocks, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CheckStats s;
    CU_CHECK(cuMemcpyDtoH_v2(&s, stats_->ptr, sizeof s));
    const double rel_l2 = s.sum_sq_ref > 0 ? std::sqrt(s.sum_sq_diff / s.sum_sq_ref) : std::sqrt(s.sum_sq_diff);
    json r = {{"value", group_.outputs[o].value}, {"mismatches", s.n_bad}, {"max_abs_err", s.max_abs_err}, {"rel_l2", rel_l2}};
    if (s.n_bad > 0) {
      auto element_at = [&](CUdeviceptr p) {
        std::string bytes(element, '\0');
        CU_CHECK(cuMemcpyDtoH_v2(bytes.data(), p + s.first_bad * element, element));
        float v = 0;
        std::memcpy(&v, as_slot_dtype(bytes, dtype, "float32").data(), sizeof v);
        return v;
      };
      const float got = element_at(out), want = element_at(ref);
      r["first_mismatch"] = {{"index", s.first_bad}, {"out", std::isfinite(got) ? json(got) : json(std::to_string(got))},
                             {"ref", std::isfinite(want) ? json(want) : json(std::to_string(want))}};
    }
    ok = ok && s.n_bad == 0 && (!norm_resolvable(s.sum_sq_ref, n, atol) || rel_l2 <= rtol);
    per_output.push_back(r);
  }
  return json{{"passed", ok}, {"outputs", per_output}};
}

void Worker::run_candidate(const json& cand) {
  const std::string name = cand.at("name").get<std::string>();
  std::printf("begin %s\n", name.c_str());
  std::fflush(stdout);
  json result = {{"name", name}, {"resources", {{"registers", 0}, {"static_shared_bytes", 0}}}};
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  auto finish = [&](const std::string& status, const std::string& error) {
    result["status"] = status;
    if (!error.empty()) result["error"] = error;
    emit("result", result);
    if (mod) Driver::get().cuModuleUnload(mod);
  };
  if (cand.contains("cubin")) {  // the candidate's own kernel
    const std::string cubin = read_file(cand.at("cubin").get<std::string>());
    CU_CHECK(cuModuleLoadData(&mod, cubin.data()));
    CU_CHECK(cuModuleGetFunction(&f, mod, cand.at("lowered").get<std::string>().c_str()));
    int regs = 0, smem = 0, max_threads = 0;
    CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    CU_CHECK(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
    CU_CHECK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    result["resources"] = {{"registers", regs}, {"static_shared_bytes", smem}, {"max_threads_per_block", max_threads}};
    const auto block = cand.at("block").get<std::vector<unsigned>>();
    const unsigned threads = block[0] * block[1] * block[2];
    if ((int)threads > max_threads) {
      return finish("out_of_resources", std::to_string(threads) + " threads per block, the compiled kernel allows " +
                                            std::to_string(max_threads) + " (registers: " + std::to_string(regs) + ")");
    }
    // Over 48 KB of shared memory, static and dynamic together, is an opt-in per kernel.
    const unsigned dynamic = cand.at("shared_bytes").get<unsigned>();
    if (dynamic + (unsigned)smem > 48 * 1024 &&
        Driver::get().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dynamic) != CUDA_SUCCESS)
      return finish("out_of_resources", std::to_string(dynamic) + " bytes of dynamic shared memory refused");
  }
  // A library call (cuBLASLt, cuDNN) computes the product; the kernel, if any, is its epilogue
  // pass and reads the product from the B operand's slot (templates/gemm_epilogue.cuh).
  std::function<CUresult(CUstream)> library;
  KernelArgs kernel_args = args_;
  const json* call = library_call_of(cand);
  const int out_slot = call ? call->at("output_slot").get<int>() : -1;
  const bool product_pass = call && out_slot < 0;
  if (product_pass && !product_) product_ = std::make_unique<DeviceBuffer>((size_t)group_.numel() * sizeof(float));
  if (call) {
    std::string unavailable;
    float* out = product_pass ? reinterpret_cast<float*>(product_->ptr) : args_.ptr[out_slot];
    library = library_run(cand, out, result, unavailable);
    if (!library) return finish("unavailable", unavailable);
    if (product_pass) kernel_args.ptr[1] = out;
  }
  // A kernel's own workspace (zeroed, as the extension's is when it is allocated), after the slots.
  std::unique_ptr<DeviceBuffer> workspace;
  if (cand.contains("workspace_bytes")) {
    const size_t bytes = cand.at("workspace_bytes").get<size_t>();
    workspace = std::make_unique<DeviceBuffer>(bytes);
    CU_CHECK(cuMemsetD8_v2(workspace->ptr, 0, bytes));
    kernel_args.ptr[group_.slots.size() + 1] = reinterpret_cast<float*>(workspace->ptr);
  }
  // Operands the kernel reads as TMA tensor maps: {"tensor_maps": [box rows of slot 0, of slot 1, ...],
  // "tensor_map_type"?: their element type (kGemmTma*, float32 when absent), "tensor_map_b_mn"?:
  // slot 1 read MN-major}.
  std::vector<TmaMap> maps;
  if (cand.contains("tensor_maps")) {
    const auto boxes = cand.at("tensor_maps").get<std::vector<int>>();
    const int type = cand.value("tensor_map_type", (int)kGemmTmaFloat32);
    const bool b_mn = cand.value("tensor_map_b_mn", false);
    maps.resize(boxes.size());
    for (size_t s = 0; s < boxes.size(); ++s)
      if (const CUresult e = encode_gemm_operand(Driver::get().cuTensorMapEncodeTiled, &maps[s], kernel_args, (int)s,
                                                 boxes[s], type, s == 1 && b_mn);
          e != CUDA_SUCCESS)
        return finish("out_of_resources", "cuTensorMapEncodeTiled refused operand " + std::to_string(s) + ": " + cu_error_name(e));
  }
  lt_status_ = CUBLAS_STATUS_SUCCESS;
  long long split_bytes = 0;
  const std::vector<unsigned> grid = f ? grid_of(f, cand, kernel_args, split_bytes) : std::vector<unsigned>{};
  if (f && cand.value("persistent", false)) result["persistent_blocks"] = grid[0];
  std::unique_ptr<DeviceBuffer> split_ws;  // zeroed, as the extension's is when it is allocated
  if (split_bytes > 0) {
    split_ws = std::make_unique<DeviceBuffer>((size_t)split_bytes);
    CU_CHECK(cuMemsetD8_v2(split_ws->ptr, 0, (size_t)split_bytes));
    result["split_workspace_bytes"] = split_bytes;
  }
  // Without either, nothing would write the outputs: a family that says it has no kernel must
  // make a library call.
  FT_CHECK(f || library, name + " has neither a kernel nor a library call");
  auto run = [&](CUstream stream) {
    CUresult r = library ? library(stream) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && f) r = launch(f, cand, grid, kernel_args, maps, split_ws ? split_ws->ptr : 0, stream);
    return r;
  };
  auto launch_error = [&](CUresult r) {
    const std::string library = library_error();
    return library.empty() ? cu_error_name(r) : library;
  };
  // Correctness: poisoned outputs, one run, compare.
  for (const auto& o : outputs_) CU_CHECK(cuMemsetD32_v2(o->ptr, 0x7fc00000u, o->bytes / 4));
  if (product_pass) CU_CHECK(cuMemsetD32_v2(product_->ptr, 0x7fc00000u, product_->bytes / 4));
  CUresult r = run(nullptr);
  if (r == CUDA_SUCCESS) r = Driver::get().cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    if (is_sticky_error(r)) {
      finish("fault", cu_error_name(r));
      std::exit(3);  // the context is lost; the parent starts a fresh worker for the rest
    }
    if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)  // a config for a larger GPU than this one
      return finish("unavailable", std::to_string(grid[0] * grid[1] * grid[2]) +
                                       " blocks cannot all be resident at once on this GPU (a cooperative launch)");
    return finish("out_of_resources", "launch failed: " + launch_error(r));
  }
  result["check"] = check_outputs();
  if (!result["check"]["passed"].get<bool>()) return finish("incorrect", "output differs from PyTorch's reference");

  // Timing: warm-up, then runs each preceded by an L2 flush and timed by its own event pair.
  const int warmup = job_.value("warmup", 3);
  const int min_runs = job_.value("min_runs", 25), max_runs = job_.value("max_runs", 1000);
  const double min_ms = job_.value("min_ms", 100.0);
  auto timed = [&](int runs) {
    std::vector<CUevent> ev(2 * runs);
    for (auto& e : ev) CU_CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    CUresult status = CUDA_SUCCESS;
    for (int i = 0; i < runs && status == CUDA_SUCCESS; ++i) {
      CU_CHECK(cuMemsetD32Async(flush_->ptr, (unsigned)i, flush_->bytes / 4, nullptr));
      CU_CHECK(cuEventRecord(ev[2 * i], nullptr));
      status = run(nullptr);
      CU_CHECK(cuEventRecord(ev[2 * i + 1], nullptr));
    }
    if (status == CUDA_SUCCESS) status = Driver::get().cuCtxSynchronize();
    if (status != CUDA_SUCCESS) {
      finish("fault", "during timing: " + launch_error(status));
      std::exit(3);
    }
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      float t = 0;
      CU_CHECK(cuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
      ms.push_back(t);
    }
    for (auto& e : ev) Driver::get().cuEventDestroy_v2(e);
    return ms;
  };
  // A candidate far slower than the best so far cannot win: its first warm-up run shows it, and
  // three timed runs record how slow it is (in a row group's grid such candidates take 100-500x
  // the best, and full warm-up and timing of them was most of the search's time).
  std::vector<double> warm = timed(1);
  const bool hopeless = best_ms_ > 0 && warm[0] > 3.0 * best_ms_;
  if (!hopeless && warmup > 1) {
    std::vector<double> rest = timed(warmup - 1);
    warm.insert(warm.end(), rest.begin(), rest.end());
  }
  std::sort(warm.begin(), warm.end());
  const double estimate = std::max(warm[warm.size() / 2], 1e-3);
  int runs = (int)std::clamp<double>(std::ceil(min_ms / estimate), min_runs, max_runs);
  if (hopeless) {
    runs = 3;
    result["early_stop"] = "first warm-up run took " + format_float(estimate) + " ms, over 3x the best " +
                           format_float(best_ms_) + " ms";
  }
  emit("timing", json{{"expected_ms", runs * (estimate + 0.5)}});
  std::vector<double> samples = timed(runs);
  result["time_ms"] = time_stats(samples);
  result["samples_ms"] = samples;
  const double median = result["time_ms"]["median"].get<double>();
  if (best_ms_ < 0 || median < best_ms_) best_ms_ = median;
  finish("ok", "");
}

// IEEE half's 16 bits as a float (exact: every half is a float).
float f16_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else {  // zero or subnormal: mant * 2^-24
    float v = std::ldexp((float)mant, -24);
    std::memcpy(&bits, &v, sizeof bits);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A float rounded to the nearest half (ties to even, as the kernels' cvt.rn and PyTorch's casts).
uint16_t float_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00 : 0x7c00);  // nan, inf
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504: inf
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half, a multiple of 2^-24
    const float scaled = std::fabs(f) * 16777216.f;  // exact; nearbyint rounds ties to even
    return sign | (uint16_t)std::nearbyint(scaled);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // ties to even at bit 13
  return sign | (uint16_t)((rounded - 0x38000000u) >> 13);       // rebias 127 -> 15
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);  // a quiet nan
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace

std::string as_slot_dtype(std::string data, const std::string& recorded, const std::string& slot) {
  if (recorded == slot) return data;
  if (recorded == "float32" && is_half(slot)) {  // a float32 value stored in half (Planner::store_half)
    const size_t n = data.size() / sizeof(float);
    std::string halves(n * 2, '\0');
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, &data[i * sizeof(float)], sizeof v);
      const uint16_t h = slot == "float16" ? float_to_f16(v) : float_to_bf16(v);
      std::memcpy(&halves[i * 2], &h, sizeof h);
    }
    return halves;
  }
  if (slot != "float32" || !(recorded == "bool" || is_half(recorded)))
    FT_THROW("a recorded " + recorded + " tensor cannot be read as " + slot);
  const size_t element = (size_t)dtype_bytes(recorded), n = data.size() / element;
  std::string floats(n * sizeof(float), '\0');
  for (size_t i = 0; i < n; ++i) {
    float v;
    if (recorded == "bool") {
      v = data[i] ? 1.f : 0.f;
    } else {
      uint16_t h;
      std::memcpy(&h, &data[i * element], sizeof h);
      v = recorded == "float16" ? f16_to_float(h) : bf16_to_float(h);
    }
    std::memcpy(&floats[i * sizeof(float)], &v, sizeof v);
  }
  return floats;
}

json time_stats(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  auto q = [&](double p) {
    const double pos = p * (s.size() - 1);
    const size_t lo = (size_t)pos;
    const size_t hi = std::min(lo + 1, s.size() - 1);
    return s[lo] + (s[hi] - s[lo]) * (pos - lo);
  };
  return json{{"median", q(0.5)}, {"min", s.front()}, {"p20", q(0.2)}, {"p80", q(0.8)}, {"runs", s.size()}};
}

int run_measure_worker(const std::string& job_path) {
  const json job = json::parse(read_file(job_path));
  Worker w(job);
  w.setup();
  for (const json& cand : job.at("candidates")) w.run_candidate(cand);
  return 0;
}

}  // namespace fusetune
