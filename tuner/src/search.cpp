// Search of one kernel group: compile pool, measuring worker supervision, journal, winner.
#include "search.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fcntl.h>
#include <random>

#include "error.h"
#include "families.h"
#include "journal.h"
#include "measure.h"
#include "util.h"

namespace fusetune {

namespace {

struct Pending {
  std::string name;
  std::string key;
  json job;  // the worker's candidate entry
};

// Runs the worker over `pending` until each candidate has a result (or the budget runs out).
class WorkerSupervisor {
 public:
  // `final_round`: the entries are the final's repeated runs of finalists, which the progress
  // display does not count as candidates.
  WorkerSupervisor(SearchContext& ctx, const SearchOptions& opt, const Group& g, Journal& journal, Progress& progress,
                   std::map<std::string, json>& results, bool final_round = false)
      : ctx_(ctx), opt_(opt), g_(g), journal_(journal), progress_(progress), results_(results), final_round_(final_round) {}

  void run(std::vector<Pending> pending, Clock::time_point start);

 private:
  bool run_worker(std::vector<Pending>& pending);
  void record(const Pending& p, json result);

  SearchContext& ctx_;
  const SearchOptions& opt_;
  const Group& g_;
  Journal& journal_;
  Progress& progress_;
  std::map<std::string, json>& results_;
  const bool final_round_;
  double best_ms_ = -1;
};

void WorkerSupervisor::record(const Pending& p, json result) {
  result["name"] = p.name;
  journal_.append(p.key, result);
  const bool ok = result.value("status", "") == "ok";
  if (ok) {
    const double ms = result["time_ms"]["median"].get<double>();
    if (best_ms_ < 0 || ms < best_ms_) best_ms_ = ms;
  }
  results_[p.name] = result;
  if (!final_round_) progress_.measured(ok, best_ms_);
  // Not logged: a library rank its heuristic does not offer (best.json still lists it).
  if (!ok && result.value("status", "") != "unavailable")
    progress_.log(g_.id + " " + p.name + ": " + result.value("status", "?") + " " + result.value("error", ""));
}

void WorkerSupervisor::run(std::vector<Pending> pending, Clock::time_point start) {
  for (const auto& [name, r] : results_)
    if (r.value("status", "") == "ok") {
      const double ms = r["time_ms"]["median"].get<double>();
      if (best_ms_ < 0 || ms < best_ms_) best_ms_ = ms;
    }
  int attempts_without_progress = 0;
  while (!pending.empty()) {
    if (opt_.budget_seconds > 0 && seconds_since(start) > opt_.budget_seconds) {
      for (const auto& p : pending)
        results_[p.name] = json{{"name", p.name}, {"status", "skipped"}, {"error", "search time budget spent"}};
      progress_.log(g_.id + ": time budget of " + format_float(opt_.budget_seconds) + " s spent; " +
                    std::to_string(pending.size()) + " candidates not measured");
      return;
    }
    const size_t before = pending.size();
    const bool ready_seen = run_worker(pending);
    if (pending.size() == before && ++attempts_without_progress >= 3)
      FT_THROW(std::string("the measuring worker ") + (ready_seen ? "settles no candidate" : "fails to start") + "; see " +
               path_join(ctx_.work_dir, "worker.log"));
  }
}

// Returns whether the worker got ready; removes every candidate it settled from `pending`.
bool WorkerSupervisor::run_worker(std::vector<Pending>& pending) {
  json job = {{"group", g_.to_json()},         {"tensors_dir", ctx_.tensors_dir}, {"tensor_index", ctx_.tensor_index},
              {"atol", opt_.atol},             {"rtol", opt_.rtol},               {"min_runs", opt_.min_runs},
              {"min_ms", opt_.min_ms},         {"best_ms", best_ms_ > 0 ? json(best_ms_) : json()}};
  job["compile"] = {{"include_dirs", ctx_.template_dirs}, {"arch", ctx_.arch},
                    {"cache_dir", path_join(ctx_.work_dir, "cache")}};
  job["cublaslt_path"] = ctx_.cublaslt_path;
  job["cudnn_path"] = ctx_.cudnn_path;
  job["candidates"] = json::array();
  for (const auto& p : pending) job["candidates"].push_back(p.job);
  const std::string job_path = path_join(ctx_.work_dir, "job_" + g_.id + ".json");
  write_file_atomic(job_path, job.dump());

  int out[2];
  if (::pipe(out) != 0) FT_THROW("pipe failed");
  const std::string exe = self_exe(), log_path = path_join(ctx_.work_dir, "worker.log");
  const pid_t pid = ::fork();
  if (pid < 0) FT_THROW("fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) ::dup2(log, 2);
    ::close(out[0]);
    ::setpgid(0, 0);
    ::execl(exe.c_str(), exe.c_str(), "_worker", "--job", job_path.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  bool ready = false;
  std::string current, buffer;
  auto deadline = Clock::now() + std::chrono::seconds(900);  // uploading tensors can take a while
  auto settle_current = [&](const std::string& status, const std::string& error) {
    auto it = std::find_if(pending.begin(), pending.end(), [&](const Pending& p) { return p.name == current; });
    if (it == pending.end()) return;
    record(*it, json{{"status", status}, {"error", error}});
    pending.erase(it);
    current.clear();
  };
  bool timed_out = false;
  while (true) {
    const int wait_ms = (int)std::max<long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd pfd{out[0], POLLIN, 0};
    const int n = ::poll(&pfd, 1, wait_ms);
    if (n == 0) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      break;
    }
    char chunk[65536];
    const ssize_t got = ::read(out[0], chunk, sizeof chunk);
    if (got <= 0) break;
    buffer.append(chunk, got);
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      const auto sp = line.find(' ');
      const std::string kind = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      if (kind == "ready") {
        ready = true;
        ctx_.device = json::parse(rest).at("device");
        write_file_atomic(path_join(ctx_.work_dir, "device.json"), ctx_.device.dump(1));
      } else if (kind == "begin") {
        current = rest;
      } else if (kind == "result") {
        const json r = json::parse(rest);
        auto it = std::find_if(pending.begin(), pending.end(), [&](const Pending& p) { return p.name == r.at("name"); });
        if (it != pending.end()) {
          record(*it, r);
          pending.erase(it);
        }
        current.clear();
      } else if (kind == "timing") {  // the worker's estimate of its timed runs extends the deadline
        deadline += std::chrono::milliseconds((long)(1.5 * json::parse(rest).at("expected_ms").get<double>()));
        continue;
      }
      deadline = Clock::now() + std::chrono::milliseconds((long)(opt_.candidate_timeout_s * 1000));
    }
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "exit status " + std::to_string(WEXITSTATUS(status));
  if (timed_out && !current.empty()) {
    settle_current("timeout", "no result within " + format_float(opt_.candidate_timeout_s) + " s; worker killed");
  } else if (!current.empty()) {
    settle_current("fault", "worker ended (" + how + ") while running this candidate");
  } else if (!ready && (status != 0 || timed_out)) {
    progress_.log("measuring worker failed before it was ready (" + how + "); see " + log_path);
  }
  return ready;
}

// Identifies a measurement: what runs (the compiled kernel, the library call and the library
// itself), on which data, under which tolerances, on which GPU.
std::string candidate_key(const SearchContext& ctx, const SearchOptions& opt, const std::string& what) {
  return sha256_hex(what + "\n" + ctx.data_key + "\n" + format_float(opt.atol) + "/" + format_float(opt.rtol) + "\n" +
                    ctx.device.value("name", ""));
}

// The winner: fastest median. Candidates whose median is within the uncertainty of the
// fastest's median (its p20-p80 spread over sqrt(runs)) are tied, and the simplest of them
// (fewest registers, then least shared memory) is kept.
json pick_best(const std::vector<json>& candidates) {
  const json* fastest = nullptr;
  for (const auto& c : candidates)
    if (c.value("status", "") == "ok" && !c.contains("early_stop") &&
        (!fastest || c["time_ms"]["median"] < (*fastest)["time_ms"]["median"]))
      fastest = &c;
  if (!fastest) return json();
  const double fast = (*fastest)["time_ms"]["median"];
  const json& ft = (*fastest)["time_ms"];
  const double spread = (ft["p80"].get<double>() - ft["p20"].get<double>()) / std::sqrt(std::max(1.0, ft["runs"].get<double>()));
  const json* pick = fastest;
  auto cost = [](const json& c) {
    const json& r = c["resources"];
    return std::make_pair(r["registers"].get<int>(), r["static_shared_bytes"].get<long>());
  };
  for (const auto& c : candidates)
    if (c.value("status", "") == "ok" && !c.contains("early_stop") && c["time_ms"]["median"].get<double>() <= fast + spread &&
        cost(c) < cost(*pick))
      pick = &c;
  json best = {{"name", (*pick)["name"]}, {"family", (*pick)["family"]}, {"template", (*pick)["template"]},
               {"params", (*pick)["params"]}, {"time_ms", (*pick)["time_ms"]}};
  if (pick->contains("library")) best["library"] = (*pick)["library"];
  if (pick != fastest)
    best["tie"] = "within the timing spread (" + format_float(spread) + " ms) of " + (*fastest)["name"].get<std::string>() +
                  " (" + format_float(fast) + " ms); the simpler config is kept";
  return best;
}

struct Candidate {
  const Family* family;
  std::string template_file;
  Config config;
};

}  // namespace

// The final: under a sustained load the GPU's clocks drop in steps (docs/PERF.md, 2026-12-04),
// so candidates timed seconds apart are not timed on the same GPU, and the ranking of close ones
// follows the order in which they ran. The finalists (each family's fastest, then the fastest
// others, all within kFinalMargin of the fastest median; at most kFinalists) are therefore timed
// again in kFinalRounds rounds, one after another in each round and each round starting with the
// next of them. A finalist's score is the median over rounds of its time over the round's
// fastest; the lowest score wins.
constexpr double kFinalMargin = 1.10;
constexpr size_t kFinalists = 4;
constexpr int kFinalRounds = 6;

std::vector<std::string> pick_finalists(const std::vector<json>& candidates) {
  std::vector<const json*> ok;
  for (const auto& c : candidates)
    if (c.value("status", "") == "ok" && !c.contains("early_stop")) ok.push_back(&c);
  std::stable_sort(ok.begin(), ok.end(),
                   [](const json* a, const json* b) { return (*a)["time_ms"]["median"] < (*b)["time_ms"]["median"]; });
  std::vector<std::string> finalists;
  if (ok.empty()) return finalists;
  const double limit = kFinalMargin * (*ok[0])["time_ms"]["median"].get<double>();
  std::vector<std::string> families;
  for (int pass = 0; pass < 2; ++pass)  // each family's fastest first, then the fastest others
    for (const json* c : ok) {
      if (finalists.size() == kFinalists || (*c)["time_ms"]["median"].get<double>() > limit) break;
      const std::string name = (*c)["name"], family = (*c)["family"];
      const bool new_family = std::find(families.begin(), families.end(), family) == families.end();
      if (std::find(finalists.begin(), finalists.end(), name) != finalists.end() || (pass == 0 && !new_family)) continue;
      finalists.push_back(name);
      families.push_back(family);
    }
  return finalists;
}

// The final's outcome from its runs ("<name>#<round>" in `runs`): per finalist its round medians
// and score; "winner" is null where fewer than two finalists passed every round.
json score_final(const std::vector<std::string>& finalists, const std::map<std::string, json>& runs) {
  json out = {{"finalists", finalists}, {"rounds", kFinalRounds}, {"round_ms", json::object()}, {"score", json::object()}};
  std::map<std::string, std::vector<double>> round_ms;  // of the finalists that passed every round
  for (const auto& f : finalists) {
    std::vector<double> ms;
    for (int r = 0; r < kFinalRounds; ++r) {
      const auto it = runs.find(f + "#" + std::to_string(r));
      if (it == runs.end() || it->second.value("status", "") != "ok") break;
      ms.push_back(it->second["time_ms"]["median"].get<double>());
    }
    if ((int)ms.size() != kFinalRounds) {
      out["dropped"][f] = "a round did not pass";
      continue;
    }
    out["round_ms"][f] = ms;
    round_ms[f] = ms;
  }
  if (round_ms.size() < 2) {
    out["winner"] = nullptr;
    return out;
  }
  std::vector<double> fastest(kFinalRounds, INFINITY);
  for (const auto& [f, ms] : round_ms)
    for (int r = 0; r < kFinalRounds; ++r) fastest[r] = std::min(fastest[r], ms[r]);
  std::string winner;
  double best = 0;
  for (const auto& f : finalists) {  // in finalist order: the first of equal scores wins
    if (!round_ms.count(f)) continue;
    const std::vector<double>& ms = round_ms[f];
    std::vector<double> rel;
    for (int r = 0; r < kFinalRounds; ++r) rel.push_back(ms[r] / fastest[r]);
    const double score = time_stats(rel)["median"];
    out["score"][f] = score;
    if (winner.empty() || score < best) winner = f, best = score;
  }
  out["winner"] = winner;
  return out;
}

SearchSpace load_space(const SearchContext& ctx, const std::string& family) {
  const std::string path = path_join(ctx.configs_dir, family + ".json");
  if (!file_exists(path)) FT_USER_ERROR("no search space for family " + family + ": " + path + " is missing");
  return SearchSpace::load(path);
}

CompileJob candidate_job(const Group& g, const Config& c, const std::string& template_file, const std::string& arch) {
  const Family& f = family_by_name(c.family);
  const std::string kernel = f.kernel_instance(g, [&](const std::string& p) { return std::to_string(c.at(p)); });
  std::string src = "// " + g.id + "\n#include \"" + f.kernel_header(template_file) + "\"\n\n" + g.op_struct;
  return CompileJob{c.name(), src, kernel, f.arch(arch)};
}

std::vector<CompileJob> compile_jobs(const Group& g, const SearchContext& ctx, const std::string& policy) {
  std::vector<CompileJob> jobs;
  for (const Family* f : families_for(g, ctx.arch)) {
    const SearchSpace space = load_space(ctx, f->name());
    for (const Config& c : space.enumerate())
      if (f->allowed(g, c, policy) && f->has_kernel(g, c)) jobs.push_back(candidate_job(g, c, space.template_file, ctx.arch));
  }
  return jobs;
}

json search_group(const Group& g, SearchContext& ctx, const SearchOptions& opt, Progress& progress, int index, int count) {
  const auto start = Clock::now();
  std::vector<Candidate> configs;  // every family that can run the group competes
  std::vector<std::string> refused;
  for (const Family* f : families_for(g, ctx.arch, &refused)) {
    const SearchSpace space = load_space(ctx, f->name());
    for (const Config& c : space.enumerate())
      if (f->allowed(g, c, opt.precision)) configs.push_back(Candidate{f, space.template_file, c});
  }
  for (const auto& r : refused) progress.log(g.id + ": cannot run this group: " + r);
  const size_t space_size = configs.size();
  if (space_size == 0) FT_USER_ERROR("the search space of " + g.family + " is empty after its constraints");
  if (opt.budget_candidates > 0 && (size_t)opt.budget_candidates < configs.size()) {
    std::mt19937_64 rng(opt.seed);
    std::shuffle(configs.begin(), configs.end(), rng);
    configs.resize(opt.budget_candidates);
  }
  std::stable_partition(configs.begin(), configs.end(), [](const Candidate& c) { return c.family->measure_first(); });
  progress.start_group(index, count, g.id + " " + g.family, (int)configs.size());
  progress.log(g.id + " (" + g.family + ": " + std::to_string(g.ops.size()) + " ops): " + std::to_string(configs.size()) +
               " of " + std::to_string(space_size) + " candidates");

  std::vector<CompileJob> jobs;  // a library call alone has no kernel
  std::vector<int> job_of(configs.size(), -1);
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i].family->has_kernel(g, configs[i].config)) {
      progress.compiled();
      continue;
    }
    job_of[i] = (int)jobs.size();
    jobs.push_back(candidate_job(g, configs[i].config, configs[i].template_file, ctx.arch));
  }
  const auto compile_start = Clock::now();
  const auto compiled = ctx.compiler->compile_all(jobs, opt.workers, [&](const CompileResult&) { progress.compiled(); });
  const double compile_s = seconds_since(compile_start);

  Journal journal(path_join(ctx.work_dir, "journal.jsonl"));
  std::map<std::string, json> results;
  std::vector<Pending> pending;
  std::map<std::string, Pending> measurable;  // every candidate that compiled, journaled or not
  for (size_t i = 0; i < configs.size(); ++i) {
    const Family& f = *configs[i].family;
    const std::string name = configs[i].config.name();
    const json library = f.library_call(g, configs[i].config);
    json entry = {{"name", name}};
    std::string what;
    if (job_of[i] >= 0) {
      const CompileResult& cr = compiled[job_of[i]];
      if (!cr.ok) {
        results[name] = json{{"name", name}, {"status", "compile_error"}, {"error", cr.log.substr(0, 2000)}};
        continue;
      }
      const LaunchDims d = f.launch(g, configs[i].config);
      entry.update(json{{"cubin", cr.cubin_path}, {"lowered", cr.lowered_name}, {"grid", {d.grid[0], d.grid[1], d.grid[2]}},
                        {"block", {d.block[0], d.block[1], d.block[2]}}, {"shared_bytes", d.shared_bytes}});
      if (const json extras = f.launch_extras(g, configs[i].config); !extras.is_null()) entry.update(extras);
      what = ctx.compiler->cache_key(jobs[job_of[i]]);
    }
    if (const int64_t ws = f.workspace_bytes(g); ws > 0 && library.is_null()) entry["workspace_bytes"] = ws;
    if (!library.is_null()) {
      entry.update(library);
      what += "\n" + library.dump() + "\n" + ctx.cublaslt_path + "\n" + ctx.cudnn_path + "\n" + g.to_json().dump();
    }
    const std::string key = candidate_key(ctx, opt, what);
    const Pending& p = measurable[name] = Pending{name, key, entry};
    if (const json* done = journal.find(key)) {
      results[name] = *done;
      results[name]["from_journal"] = true;
      continue;
    }
    pending.push_back(p);
  }
  const auto measure_start = Clock::now();
  WorkerSupervisor(ctx, opt, g, journal, progress, results).run(pending, start);
  const double measure_s = seconds_since(measure_start);

  json out = g.to_json();
  std::vector<json> candidates;
  for (const Candidate& cand : configs) {
    json c = results.at(cand.config.name());
    c["family"] = cand.family->name();
    c["template"] = cand.template_file;
    c["params"] = cand.config.to_json();
    c["precision"] = cand.family->precision(g, cand.config);
    if (cand.family->has_kernel(g, cand.config)) {
      const LaunchDims d = cand.family->launch(g, cand.config);
      c["threads"] = d.block[0] * d.block[1] * d.block[2];
    }
    candidates.push_back(c);
  }
  json best = pick_best(candidates);
  json final_round;
  const std::vector<std::string> finalists = pick_finalists(candidates);
  if (finalists.size() >= 2 && !(opt.budget_seconds > 0 && seconds_since(start) > opt.budget_seconds)) {
    std::vector<Pending> runs;
    for (int r = 0; r < kFinalRounds; ++r)
      for (size_t i = 0; i < finalists.size(); ++i) {
        Pending p = measurable.at(finalists[(i + r) % finalists.size()]);
        p.name += "#" + std::to_string(r);
        p.key = sha256_hex(p.key + "\nfinal round " + std::to_string(r));
        p.job["name"] = p.name;
        runs.push_back(p);
      }
    std::map<std::string, json> run_results;
    WorkerSupervisor(ctx, opt, g, journal, progress, run_results, true).run(runs, start);
    final_round = score_final(finalists, run_results);
    if (!final_round["winner"].is_null()) {
      const std::string winner = final_round["winner"];
      const auto c = std::find_if(candidates.begin(), candidates.end(), [&](const json& x) { return x["name"] == winner; });
      best = pick_best({*c});
      best["chosen_by"] = "the final: " + std::to_string(finalists.size()) + " finalists in " +
                          std::to_string(kFinalRounds) + " rounds (search.final)";
    }
    progress.log(g.id + ": final of " + std::to_string(finalists.size()) + " in " + std::to_string(kFinalRounds) +
                 " rounds: " + (final_round["winner"].is_null() ? std::string("no result, the fastest median kept")
                                                                 : final_round["winner"].get<std::string>()));
  }
  if (!best.is_null()) {
    const Family& winner = family_by_name(best["family"]);
    out["kernel_family"] = winner.name();
    out["template"] = best["template"];
    out["precision"] = winner.precision(g, Config::from_json(winner.name(), best["params"]));
  }
  out["search"] = {{"space_size", space_size}, {"candidates", configs.size()}, {"wall_s", seconds_since(start)},
                   {"compile_s", compile_s}, {"measure_s", measure_s}, {"families_not_searched", refused}};
  if (!final_round.is_null()) out["search"]["final"] = final_round;
  out["best"] = best;
  out["candidates"] = candidates;
  progress.finish_group();
  if (best.is_null()) {
    progress.log(g.id + ": no candidate passed the check");
  } else {
    progress.log(g.id + ": best " + best["name"].get<std::string>() + " " +
                 format_float(best["time_ms"]["median"].get<double>()) + " ms");
  }
  return out;
}

}  // namespace fusetune
