// Search of one kernel group: enumerate the family's space, compile every candidate in
// parallel, then check and time them in an isolated worker process that may fault or hang
// without stopping the search. Results are journaled so an interrupted search resumes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "compile.h"
#include "json.h"
#include "plan.h"
#include "progress.h"
#include "space.h"

namespace fusetune {

struct SearchOptions {
  int workers = 8;
  int budget_candidates = 0;      // per group; 0 = the whole space
  double budget_seconds = 0;      // per group; 0 = no limit
  double candidate_timeout_s = 20;
  uint64_t seed = 0;
  double atol = 1e-2, rtol = 1e-2;
  std::string precision = "tf32";
  int min_runs = 25;
  double min_ms = 100;
};

struct SearchContext {
  std::vector<std::string> template_dirs;
  std::string configs_dir;
  std::string work_dir;     // journal, jobs, worker log
  std::string tensors_dir;  // reference tensors + tensors.json
  json tensor_index;
  std::string arch;
  std::string cublaslt_path;  // the cuBLASLt PyTorch loads (graph.json); the worker times that one
  std::string cudnn_path;     // the same for cuDNN
  std::string data_key;     // identifies the reference data (model hash, seed, torch)
  const Compiler* compiler = nullptr;
  json device;              // filled from the worker's ready line
};

// The candidate sources of a group for one config (what NVRTC compiles, what the extension
// includes), for fusetune's target architecture `arch` (the family may compile for a variant).
CompileJob candidate_job(const Group& g, const Config& c, const std::string& template_file, const std::string& arch);
// The NVRTC jobs of every candidate the search of group g may time under the precision policy.
std::vector<CompileJob> compile_jobs(const Group& g, const SearchContext& ctx, const std::string& policy);
SearchSpace load_space(const SearchContext& ctx, const std::string& family);

// The final of a search (search.cpp says why): the names of the candidates (best.json entries)
// timed again in rounds, and its outcome from their runs, named "<name>#<round>": per finalist
// the medians of its rounds ("round_ms") and its score, the median over rounds of its time over
// the round's fastest ("score"); "winner", the lowest score, is null where fewer than two
// finalists passed every round (those that did not are under "dropped").
std::vector<std::string> pick_finalists(const std::vector<json>& candidates);
json score_final(const std::vector<std::string>& finalists, const std::map<std::string, json>& runs);

// Searches one group; returns its best.json entry (with every candidate's outcome).
json search_group(const Group& g, SearchContext& ctx, const SearchOptions& opt, Progress& progress, int index,
                  int count);

}  // namespace fusetune
