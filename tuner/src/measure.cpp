// The measuring worker: correctness check against PyTorch's reference, then timing, per
// ../shared/MEASURE.md: NaN-poisoned outputs, L2 flushed before every timed run, one event pair
// per run, median and quantiles with the raw samples kept.
#include "measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "compile.h"
#include "driver.h"
#include "error.h"
#include "families.h"
#include "plan.h"
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
  std::unique_ptr<DeviceBuffer> upload(const std::string& value);
  json check_outputs();
  double measure_bandwidth();
  CUresult launch(CUfunction f, const json& cand, CUstream stream);

  json job_;
  Group group_;
  DeviceInfo dev_;
  std::map<std::string, std::unique_ptr<DeviceBuffer>> inputs_;
  std::vector<std::unique_ptr<DeviceBuffer>> outputs_, refs_;
  std::vector<float*> slot_base_;
  std::unique_ptr<DeviceBuffer> flush_, stats_;
  CUmodule check_module_ = nullptr;
  CUfunction check_fn_ = nullptr;
  KernelArgs args_{};
  double best_ms_ = -1.0;
};

std::unique_ptr<DeviceBuffer> Worker::upload(const std::string& value) {
  const json& info = job_.at("tensor_index").at(value);
  const std::string data = read_file(path_join(job_.at("tensors_dir").get<std::string>(), info.at("file").get<std::string>()));
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
      const int64_t n = Layout::contiguous("", s.layout.sizes).numel();
      outputs_.push_back(std::make_unique<DeviceBuffer>(n * sizeof(float)));
      refs_.push_back(upload(s.layout.base));
      if (refs_.back()->bytes != n * sizeof(float)) FT_THROW("reference of " + s.layout.base + " has the wrong size");
      slot_base_.push_back(reinterpret_cast<float*>(outputs_.back()->ptr));
    } else {
      if (!inputs_.count(s.layout.base)) inputs_[s.layout.base] = upload(s.layout.base);
      slot_base_.push_back(reinterpret_cast<float*>(inputs_[s.layout.base]->ptr));
    }
  }
  args_ = kernel_args(group_, slot_base_);
  flush_ = std::make_unique<DeviceBuffer>((size_t)std::max(dev_.l2_bytes, 1 << 20) * 2);
  stats_ = std::make_unique<DeviceBuffer>(sizeof(CheckStats));

  const json& c = job_.at("compile");
  Compiler compiler(c.at("include_dirs").get<std::vector<std::string>>(), c.at("arch").get<std::string>(),
                    c.at("cache_dir").get<std::string>());
  const CompileResult check = compiler.compile(
      CompileJob{"fusetune_check", "#include \"check.cuh\"\n", "fusetune_check"});
  if (!check.ok) FT_THROW("the check kernel does not compile: " + check.log);
  const std::string cubin = read_file(check.cubin_path);
  CU_CHECK(cuModuleLoadData(&check_module_, cubin.data()));
  CU_CHECK(cuModuleGetFunction(&check_fn_, check_module_, check.lowered_name.c_str()));
  if (job_.contains("best_ms") && job_.at("best_ms").is_number()) best_ms_ = job_.at("best_ms").get<double>();

  json device = {{"name", dev_.name},
                 {"compute_capability", std::to_string(dev_.cc_major) + "." + std::to_string(dev_.cc_minor)},
                 {"sm_count", dev_.sm_count},
                 {"l2_bytes", dev_.l2_bytes},
                 {"clock_khz", dev_.clock_khz},
                 {"driver_version", dev_.driver_version},
                 {"fp32_peak_tflops", dev_.fp32_peak_flops() / 1e12},
                 {"copy_bandwidth_gbps", measure_bandwidth()}};
  emit("ready", json{{"device", device}});
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

CUresult Worker::launch(CUfunction f, const json& cand, CUstream stream) {
  const auto g = cand.at("grid").get<std::vector<unsigned>>();
  const auto b = cand.at("block").get<std::vector<unsigned>>();
  void* params[] = {&args_};
  return Driver::get().cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], cand.at("shared_bytes").get<unsigned>(),
                                      stream, params, nullptr);
}

json Worker::check_outputs() {
  const float atol = job_.at("atol").get<float>(), rtol = job_.at("rtol").get<float>();
  json per_output = json::array();
  bool ok = true;
  for (size_t o = 0; o < outputs_.size(); ++o) {
    CheckStats init{0, ~0ULL, 0.0, 0.0, 0.f, 0.f};
    CU_CHECK(cuMemcpyHtoD_v2(stats_->ptr, &init, sizeof init));
    long long n = (long long)(outputs_[o]->bytes / sizeof(float));
    CUdeviceptr out = outputs_[o]->ptr, ref = refs_[o]->ptr, st = stats_->ptr;
    float fa = atol, fr = rtol;
    void* params[] = {&out, &ref, &n, &fa, &fr, &st};
    const unsigned blocks = (unsigned)std::min<long long>(std::max<long long>(ceil_div(n, 256), 1), 4096);
    CU_CHECK(cuLaunchKernel(check_fn_, blocks, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr));
    CheckStats s;
    CU_CHECK(cuMemcpyDtoH_v2(&s, stats_->ptr, sizeof s));
    const double rel_l2 = s.sum_sq_ref > 0 ? std::sqrt(s.sum_sq_diff / s.sum_sq_ref) : std::sqrt(s.sum_sq_diff);
    json r = {{"value", group_.outputs[o].value}, {"mismatches", s.n_bad}, {"max_abs_err", s.max_abs_err}, {"rel_l2", rel_l2}};
    if (s.n_bad > 0) {
      float got = 0, want = 0;
      CU_CHECK(cuMemcpyDtoH_v2(&got, out + s.first_bad * sizeof(float), sizeof got));
      CU_CHECK(cuMemcpyDtoH_v2(&want, ref + s.first_bad * sizeof(float), sizeof want));
      r["first_mismatch"] = {{"index", s.first_bad}, {"out", std::isfinite(got) ? json(got) : json(std::to_string(got))},
                             {"ref", std::isfinite(want) ? json(want) : json(std::to_string(want))}};
    }
    ok = ok && s.n_bad == 0 && rel_l2 <= rtol;
    per_output.push_back(r);
  }
  return json{{"passed", ok}, {"outputs", per_output}};
}

void Worker::run_candidate(const json& cand) {
  const std::string name = cand.at("name").get<std::string>();
  std::printf("begin %s\n", name.c_str());
  std::fflush(stdout);
  json result = {{"name", name}};
  const std::string cubin = read_file(cand.at("cubin").get<std::string>());
  CUmodule mod;
  CUfunction f;
  CU_CHECK(cuModuleLoadData(&mod, cubin.data()));
  CU_CHECK(cuModuleGetFunction(&f, mod, cand.at("lowered").get<std::string>().c_str()));
  int regs = 0, smem = 0, max_threads = 0;
  CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
  CU_CHECK(cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
  CU_CHECK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
  result["resources"] = {{"registers", regs}, {"static_shared_bytes", smem}, {"max_threads_per_block", max_threads}};
  const auto block = cand.at("block").get<std::vector<unsigned>>();
  const unsigned threads = block[0] * block[1] * block[2];
  auto finish = [&](const std::string& status, const std::string& error) {
    result["status"] = status;
    if (!error.empty()) result["error"] = error;
    emit("result", result);
    Driver::get().cuModuleUnload(mod);
  };
  if ((int)threads > max_threads) {
    return finish("out_of_resources", std::to_string(threads) + " threads per block, the compiled kernel allows " +
                                          std::to_string(max_threads) + " (registers: " + std::to_string(regs) + ")");
  }
  // Correctness: poisoned outputs, one run, compare.
  for (const auto& o : outputs_) CU_CHECK(cuMemsetD32_v2(o->ptr, 0x7fc00000u, o->bytes / 4));
  CUresult r = launch(f, cand, nullptr);
  if (r == CUDA_SUCCESS) r = Driver::get().cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    if (is_sticky_error(r)) {
      finish("fault", cu_error_name(r));
      std::exit(3);  // the context is lost; the parent starts a fresh worker for the rest
    }
    return finish("out_of_resources", "launch failed: " + cu_error_name(r));
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
      status = launch(f, cand, nullptr);
      CU_CHECK(cuEventRecord(ev[2 * i + 1], nullptr));
    }
    if (status == CUDA_SUCCESS) status = Driver::get().cuCtxSynchronize();
    if (status != CUDA_SUCCESS) {
      finish("fault", "during timing: " + cu_error_name(status));
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
  std::vector<double> warm = timed(warmup);
  std::sort(warm.begin(), warm.end());
  const double estimate = std::max(warm[warm.size() / 2], 1e-3);
  int runs = (int)std::clamp<double>(std::ceil(min_ms / estimate), min_runs, max_runs);
  // A candidate far slower than the best so far cannot win: a few runs show it.
  if (best_ms_ > 0 && estimate > 3.0 * best_ms_) {
    runs = 5;
    result["early_stop"] = "warm-up took " + format_float(estimate) + " ms, over 3x the best " + format_float(best_ms_) + " ms";
  }
  emit("timing", json{{"expected_ms", runs * (estimate + 0.5)}});
  std::vector<double> samples = timed(runs);
  result["time_ms"] = time_stats(samples);
  result["samples_ms"] = samples;
  const double median = result["time_ms"]["median"].get<double>();
  if (best_ms_ < 0 || median < best_ms_) best_ms_ = median;
  finish("ok", "");
}

}  // namespace

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
