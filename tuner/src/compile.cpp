// NVRTC compilation with an on-disk cache and a pool of forked compiler processes.
#include "compile.h"

#include <nvrtc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "error.h"
#include "json.h"
#include "util.h"

namespace fusetune {

namespace {

#define NVRTC_CHECK(call)                                                                   \
  do {                                                                                      \
    nvrtcResult r_ = (call);                                                                \
    if (r_ != NVRTC_SUCCESS) FT_THROW(std::string(#call) + ": " + nvrtcGetErrorString(r_)); \
  } while (0)

std::string hash_headers(const std::vector<std::string>& dirs) {
  std::string all;
  for (const auto& d : dirs)
    for (const auto& suffix : {".cuh", ".h"})
      for (const auto& f : list_files(d, suffix)) all += f + "\n" + read_file(path_join(d, f)) + "\n";
  return sha256_hex(all);
}

}  // namespace

Compiler::Compiler(std::vector<std::string> include_dirs, std::string arch, std::string cache_dir)
    : include_dirs_(std::move(include_dirs)), arch_(std::move(arch)), cache_dir_(std::move(cache_dir)) {
  headers_hash_ = hash_headers(include_dirs_);
}

std::string Compiler::nvrtc_version() {
  int major = 0, minor = 0;
  NVRTC_CHECK(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> Compiler::options(const CompileJob& job) const {
  std::vector<std::string> opts = {"--gpu-architecture=" + (job.arch.empty() ? arch_ : job.arch), "-std=c++17"};
  for (const auto& d : include_dirs_) opts.push_back("-I" + d);
  return opts;
}

std::string Compiler::cache_key(const CompileJob& job) const {
  std::string key = job.source + "\n" + job.kernel + "\n" + headers_hash_ + "\n" + nvrtc_version() + "\n" + arch_;
  for (const auto& o : options(job))
    if (o.rfind("-I", 0) != 0) key += "\n" + o;  // include paths differ between machines; contents are hashed
  return sha256_hex(key);
}

CompileResult Compiler::from_cache(const CompileJob& job) const {
  CompileResult r;
  r.name = job.name;
  const std::string base = path_join(cache_dir_, cache_key(job));
  if (!file_exists(base + ".json")) return r;
  const json meta = json::parse(read_file(base + ".json"));
  r.cached = true;
  r.ok = meta.at("ok").get<bool>();
  r.log = meta.at("log").get<std::string>();
  r.lowered_name = meta.at("lowered").get<std::string>();
  r.cubin_path = r.ok ? base + ".cubin" : "";
  return r;
}

CompileResult Compiler::compile(const CompileJob& job) const {
  CompileResult cached = from_cache(job);
  if (cached.cached) return cached;
  CompileResult r;
  r.name = job.name;
  nvrtcProgram prog;
  NVRTC_CHECK(nvrtcCreateProgram(&prog, job.source.c_str(), (job.name + ".cu").c_str(), 0, nullptr, nullptr));
  NVRTC_CHECK(nvrtcAddNameExpression(prog, job.kernel.c_str()));
  std::vector<std::string> opts = options(job);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  const nvrtcResult res = nvrtcCompileProgram(prog, (int)copts.size(), copts.data());
  size_t log_size = 0;
  NVRTC_CHECK(nvrtcGetProgramLogSize(prog, &log_size));
  r.log.resize(log_size);
  NVRTC_CHECK(nvrtcGetProgramLog(prog, r.log.data()));
  while (!r.log.empty() && (r.log.back() == '\0' || r.log.back() == '\n')) r.log.pop_back();
  std::string cubin;
  if (res == NVRTC_SUCCESS) {
    const char* lowered = nullptr;
    NVRTC_CHECK(nvrtcGetLoweredName(prog, job.kernel.c_str(), &lowered));
    r.lowered_name = lowered;
    size_t size = 0;
    NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size));
    cubin.resize(size);
    NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
    r.ok = true;
  }
  nvrtcDestroyProgram(&prog);
  // The cubin lands before the metadata that marks the entry complete.
  const std::string base = path_join(cache_dir_, cache_key(job));
  if (r.ok) write_file_atomic(base + ".cubin", cubin);
  write_file_atomic(base + ".json", json{{"name", job.name}, {"ok", r.ok}, {"lowered", r.lowered_name}, {"log", r.log}}.dump(1));
  r.cubin_path = r.ok ? base + ".cubin" : "";
  return r;
}

std::vector<CompileResult> Compiler::compile_all(const std::vector<CompileJob>& jobs, int workers,
                                                 const std::function<void(const CompileResult&)>& on_done) const {
  make_dirs(cache_dir_);
  std::vector<CompileResult> results(jobs.size());
  // Jobs with the same cache key (e.g. one epilogue kernel shared by every algorithm of a
  // library) compile once; the others take the first one's result.
  std::map<std::string, std::vector<size_t>> same_key;
  std::vector<std::string> keys;
  std::vector<size_t> distinct;
  for (size_t i = 0; i < jobs.size(); ++i) {
    keys.push_back(cache_key(jobs[i]));
    auto& group = same_key[keys.back()];
    if (group.empty()) distinct.push_back(i);
    group.push_back(i);
  }
  auto finish = [&](size_t first, const std::string& failure) {
    for (size_t i : same_key.at(keys[first])) {
      results[i] = from_cache(jobs[i]);
      if (!results[i].cached) {
        results[i].name = jobs[i].name;
        results[i].log = failure;
      }
      if (on_done) on_done(results[i]);
    }
  };
  std::map<pid_t, size_t> running;
  size_t next = 0;
  while (next < distinct.size() || !running.empty()) {
    while (next < distinct.size() && (int)running.size() < std::max(1, workers)) {
      const size_t i = distinct[next++];
      if (from_cache(jobs[i]).cached) {
        finish(i, "");
        continue;
      }
      const pid_t pid = ::fork();
      if (pid < 0) FT_THROW("fork failed");
      if (pid == 0) {
        int code = 0;
        try {
          compile(jobs[i]);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "compile %s: %s\n", jobs[i].name.c_str(), e.what());
          code = 1;
        }
        std::fflush(nullptr);
        ::_exit(code);
      }
      running[pid] = i;
    }
    if (running.empty()) continue;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) continue;
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const size_t i = it->second;
    running.erase(it);
    finish(i, "compiler process ended with status " + std::to_string(status));
  }
  return results;
}

}  // namespace fusetune
