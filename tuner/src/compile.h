// NVRTC compilation of candidates to cubins, in parallel worker processes (NVRTC serialises
// threads of one process), with an on-disk cache keyed by source, headers, options, NVRTC
// version and arch.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace fusetune {

struct CompileJob {
  std::string name;    // candidate name (for logs)
  std::string source;  // full CUDA source
  std::string kernel;  // name expression of the kernel instance to lower
  std::string arch;    // the architecture to compile for when not the compiler's (e.g. sm_90a)
};

struct CompileResult {
  std::string name;
  bool ok = false;
  bool cached = false;
  std::string cubin_path;
  std::string lowered_name;
  std::string log;  // compiler log (errors and warnings)
};

class Compiler {
 public:
  Compiler(std::vector<std::string> include_dirs, std::string arch, std::string cache_dir);

  // Compiles every job, at most `workers` processes at a time (jobs with the same cache key once);
  // reports each result as it lands.
  std::vector<CompileResult> compile_all(const std::vector<CompileJob>& jobs, int workers,
                                         const std::function<void(const CompileResult&)>& on_done) const;
  // Compiles in this process (cache first).
  CompileResult compile(const CompileJob& job) const;
  std::string cache_key(const CompileJob& job) const;
  std::vector<std::string> options(const CompileJob& job) const;
  static std::string nvrtc_version();

 private:
  CompileResult from_cache(const CompileJob& job) const;
  std::vector<std::string> include_dirs_;
  std::string arch_;
  std::string cache_dir_;
  std::string headers_hash_;
};

}  // namespace fusetune
