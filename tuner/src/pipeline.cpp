// The stages of a fusetune run. Outputs (results/best.json, extension/, model_new.py) are
// written only once the stage producing them succeeded; work files live in <out>/.fusetune.
#include "pipeline.h"

#include <cstdlib>
#include <regex>

#include "driver.h"
#include "emit.h"
#include "error.h"
#include "families.h"
#include "graph.h"
#include "plan.h"
#include "progress.h"
#include "results.h"
#include "util.h"

#ifndef FUSETUNE_SOURCE_DIR
#define FUSETUNE_SOURCE_DIR "."
#endif

namespace fusetune {

namespace {

struct Paths {
  std::string out, work, tensors, cache, best, log;
  explicit Paths(const Options& o)
      : out(absolute_path(o.out)),
        work(path_join(out, ".fusetune")),
        tensors(path_join(work, "tensors")),
        cache(path_join(work, "cache")),
        best(path_join(out, "results/best.json")),
        log(path_join(work, "fusetune.log")) {}
};

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string python() {
  const char* p = std::getenv("FUSETUNE_PYTHON");
  return p && *p ? p : "python3";
}

// Runs a helper of tuner/py. Status 2 is a user error whose line the helper printed itself; any
// other failure (a crash, a traceback) is named here with the stage that failed.
void run_python(const std::string& module, std::vector<std::string> args, const std::string& what) {
  std::vector<std::string> argv = {python(), "-m", "fusetune_py." + module};
  argv.insert(argv.end(), args.begin(), args.end());
  const char* old = std::getenv("PYTHONPATH");
  const std::string pp = "PYTHONPATH=" + path_join(fusetune_home(), "tuner/py") + (old && *old ? std::string(":") + old : "");
  const int rc = run_process(argv, {pp});
  if (rc == 2) throw ReportedError(what + " failed", __FILE__, __LINE__);
  if (rc != 0) FT_USER_ERROR(what + " failed (exit status " + std::to_string(rc) + ")");
}

// program: also write graph.pt2, which the search runs for its reference tensors (planning and
// compiling need graph.json only).
Graph capture(const Options& o, const Paths& p, bool program) {
  if (!file_exists(o.model)) FT_USER_ERROR("model file " + o.model + " does not exist");
  make_dirs(p.work);
  std::vector<std::string> args = {"--model", absolute_path(o.model), "--out", p.work, "--seed", std::to_string(o.search.seed)};
  if (!program) args.push_back("--graph-only");
  run_python("capture", args, "capturing " + o.model);
  return Graph::load(path_join(p.work, "graph.json"));
}

std::map<std::string, int64_t> numels(const Graph& g) {
  std::map<std::string, int64_t> n;
  for (const auto& [name, v] : g.values) n[name] = v.numel();
  return n;
}

DeviceInfo check_device(const Options& o) {
  const DeviceInfo dev = query_device(0);
  if (dev.arch() != o.arch)
    FT_USER_ERROR("--arch " + o.arch + " does not match the GPU present (" + dev.name + ", " + dev.arch() + ")");
  return dev;
}

// The groups a run searches: those that are no earlier group's kernel (Group::same_as).
std::vector<const Group*> searched_groups(const Plan& plan) {
  std::vector<const Group*> out;
  for (const Group& gr : plan.groups)
    if (gr.same_as.empty()) out.push_back(&gr);
  return out;
}

// best.json's entry of a group that runs an earlier group's kernel: that group's winner, with its
// candidates listed under that group.
json twin_entry(const Group& gr, const json& searched) {
  json out = gr.to_json();
  for (const char* key : {"kernel_family", "template", "precision", "best"}) out[key] = searched.at(key);
  out["search"] = {{"same_as", gr.same_as}, {"wall_s", 0.0}};
  out["candidates"] = json::array();
  return out;
}

// Saves the group inputs and PyTorch's reference outputs, unless the same data is already there.
json make_tensors(const Options& o, const Paths& p, const Graph& g, const Plan& plan, const std::string& data_key) {
  json names = json::array();
  for (const Group* gr_ptr : searched_groups(plan)) {
    const Group& gr = *gr_ptr;
    for (const auto& v : gr.input_values()) names.push_back(v);
    for (const auto& out : gr.outputs) names.push_back(out.value);
  }
  const std::string index_path = path_join(p.tensors, "tensors.json"), key_path = path_join(p.tensors, "data_key");
  if (file_exists(index_path) && file_exists(key_path) && read_file(key_path) == data_key) {
    json index = json::parse(read_file(index_path));
    bool complete = true;
    for (const auto& n : names) complete = complete && index.contains(n.get<std::string>());
    if (complete) return index;
  }
  const std::string names_path = path_join(p.work, "tensor_names.json");
  write_file_atomic(names_path, names.dump());
  run_python("tensors", {"--work", p.work, "--names", names_path, "--out", p.tensors}, "computing reference tensors");
  write_file_atomic(key_path, data_key);
  return json::parse(read_file(index_path));
}

std::vector<std::string> template_dirs(const Options& o) {
  std::vector<std::string> dirs;
  for (const auto& d : o.template_dirs) dirs.push_back(absolute_path(d));
  dirs.push_back(path_join(fusetune_home(), "templates"));
  return dirs;
}

}  // namespace

std::string fusetune_home() {
  const char* h = std::getenv("FUSETUNE_HOME");
  return absolute_path(h && *h ? h : FUSETUNE_SOURCE_DIR);
}

void validate(Options& o) {
  if (!std::regex_match(o.arch, std::regex("sm_[0-9]+a?")))
    FT_USER_ERROR("--arch must look like sm_90, got '" + o.arch + "'");
  if (o.precision != "tf32" && o.precision != "fp32")
    FT_USER_ERROR("--precision must be tf32 or fp32, got '" + o.precision + "'");
  o.search.precision = o.precision;
  if (!(o.search.atol >= 0) || !(o.search.rtol >= 0)) FT_USER_ERROR("--atol and --rtol must be non-negative");
  if (o.search.workers < 1) FT_USER_ERROR("--workers must be at least 1");
  if (o.trials < 1) FT_USER_ERROR("--trials must be at least 1");
  if (o.configs_dir.empty()) o.configs_dir = path_join(fusetune_home(), "configs");
  for (const auto& d : o.template_dirs)
    if (!file_exists(d)) FT_USER_ERROR("template folder " + d + " does not exist");
}

Graph capture_model(const Options& o) { return capture(o, Paths(o), false); }

void stage_plan(const Options& o) {
  const Paths p(o);
  const Graph g = capture(o, p, false);
  std::printf("%s\n", plan_graph(g).to_json().dump(2).c_str());
}

void stage_compile(const Options& o) {
  const Paths p(o);
  const Graph g = capture(o, p, false);
  const Plan plan = plan_graph(g);
  Compiler compiler(template_dirs(o), o.arch, p.cache);
  SearchContext ctx;
  ctx.configs_dir = o.configs_dir;
  ctx.arch = o.arch;
  int failed = 0, total = 0;
  const std::vector<const Group*> searched = searched_groups(plan);
  for (const Group* gr : searched) {
    for (const auto& r : compiler.compile_all(compile_jobs(*gr, ctx, o.precision), o.search.workers, nullptr)) {
      ++total;
      if (!r.ok) {
        ++failed;
        std::fprintf(stderr, "%s %s: compile error\n%s\n", gr->id.c_str(), r.name.c_str(), r.log.c_str());
      }
    }
  }
  std::printf("%d groups (%d distinct kernels), %d candidates compiled for %s, %d failed\n", (int)plan.groups.size(),
              (int)searched.size(), total, o.arch.c_str(), failed);
  if (failed) FT_USER_ERROR(std::to_string(failed) + " candidates do not compile");
}

namespace {

struct Searched {
  Graph graph;
  Plan plan;
  json best;
};

// Capture, plan, reference tensors and the search of every group; writes results/best.json.
Searched search_all(const Options& o, const Paths& p) {
  Progress progress(p.log);
  progress.log("fusetune: capturing " + o.model);
  const Graph g = capture(o, p, true);
  const Plan plan = plan_graph(g);
  const int count = (int)searched_groups(plan).size();
  progress.log("planned " + std::to_string(plan.groups.size()) + " kernel groups" +
               (count < (int)plan.groups.size() ? ", " + std::to_string(count) + " distinct kernels to search (the others run one of these)" : ""));
  const DeviceInfo dev = check_device(o);
  const std::string data_key = g.model_sha256 + "/" + std::to_string(o.search.seed) + "/" + g.torch_version + "/" +
                               sha256_hex(plan.to_json().dump());
  SearchContext ctx;
  ctx.template_dirs = template_dirs(o);
  ctx.configs_dir = o.configs_dir;
  ctx.work_dir = p.work;
  ctx.tensors_dir = p.tensors;
  ctx.arch = o.arch;
  ctx.cublaslt_path = g.cublaslt_path;
  ctx.cudnn_path = g.cudnn_path;
  ctx.data_key = data_key;
  ctx.device = json{{"name", dev.name}};
  // A search resumed wholly from the journal starts no worker: reuse what the last one measured.
  const std::string device_path = path_join(p.work, "device.json");
  if (file_exists(device_path)) {
    const json last = json::parse(read_file(device_path));
    if (last.value("name", "") == dev.name) ctx.device = last;
  }
  progress.log("computing reference tensors");
  ctx.tensor_index = make_tensors(o, p, g, plan, data_key);
  Compiler compiler(ctx.template_dirs, o.arch, p.cache);
  ctx.compiler = &compiler;

  json groups = json::array();
  std::map<std::string, size_t> searched;  // group id -> its entry in `groups`
  for (const Group& gr : plan.groups) {
    if (!gr.same_as.empty()) {
      groups.push_back(twin_entry(gr, groups[searched.at(gr.same_as)]));
      continue;
    }
    json r = search_group(gr, ctx, o.search, progress, (int)searched.size(), count);
    if (r["best"].is_null()) FT_USER_ERROR("no candidate of group " + gr.id + " passed the correctness check; see " + p.log);
    searched[gr.id] = groups.size();
    groups.push_back(std::move(r));
  }
  json best = make_best_json(o, g, plan, groups, ctx, numels(g));
  write_file_atomic(p.best, best.dump(1));
  progress.log("wrote " + p.best);
  return Searched{g, plan, best};
}

}  // namespace

void stage_search(const Options& o) { search_all(o, Paths(o)); }

void stage_tune(const Options& o) {
  const Paths p(o);
  const Searched s = search_all(o, p);
  std::map<std::string, KernelChoice> kernels;
  for (const json& gr : s.best.at("groups")) kernels[gr.at("id")] = KernelChoice{gr.at("kernel_family"), gr.at("template")};
  emit_extension(s.graph, s.plan, p.out, o.model, kernels);
  Progress(p.log).log("generated extension/kernels and model_new.py");
  stage_build(o);
  if (o.verify) stage_verify(o);
  if (o.profile) stage_profile(o);
}

void stage_build(const Options& o) {
  const Paths p(o);
  if (!file_exists(p.best)) FT_USER_ERROR(p.best + " does not exist: run fusetune on the model first");
  const json best = json::parse(read_file(p.best));
  check_fingerprint(best, o);
  const std::string ext = path_join(p.out, "extension");
  const std::string home_ext = path_join(fusetune_home(), "extension");
  for (const auto* f : {"binding.cpp", "binding_registry.h", "setup.py"})
    write_file_if_changed(path_join(ext, f), read_file(path_join(home_ext, f)));
  check_kernel_sources(best, path_join(ext, "kernels"), template_dirs(o));
  write_file_if_changed(path_join(ext, "kernels/tuned_constants.h"), tuned_constants_header(best));
  std::string dirs;
  for (const auto& d : template_dirs(o)) dirs += (dirs.empty() ? "" : ":") + d;
  // nvcc compiles the whole extension for the architecture variant a tuned kernel needs (sm_90a
  // for wgmma), which runs only on the GPU fusetune targets, as every tuned kernel does anyway.
  std::string arch = o.arch;
  for (const json& gr : best.at("groups"))
    if (gr.contains("kernel_family")) {
      const std::string own = family_by_name(gr.at("kernel_family")).arch(o.arch);
      if (!own.empty() && own != o.arch) arch = own;
    }
  Progress progress(p.log);
  progress.log("building cuda_extension for " + arch + " in " + ext);
  const auto start = Clock::now();
  const int rc = run_process({python(), path_join(ext, "setup.py"), "-q", "build_ext", "--inplace"},
                             {"FUSETUNE_ARCH=" + arch, "FUSETUNE_TEMPLATES=" + dirs,
                              "MAX_JOBS=" + std::to_string(o.search.workers)});
  if (rc != 0) FT_USER_ERROR("building the extension failed (exit status " + std::to_string(rc) + ")");
  progress.log("built cuda_extension in " + seconds_text(seconds_since(start)));
}

void stage_verify(const Options& o) {
  const Paths p(o);
  const std::string out = path_join(p.work, "verify.json");
  std::remove(out.c_str());
  Progress progress(p.log);
  progress.log("verifying ModelNew against Model");
  const auto start = Clock::now();
  run_python("verify", {"verify", "--model", absolute_path(o.model), "--model-new", path_join(p.out, "model_new.py"),
                        "--seed", std::to_string(o.search.seed), "--trials", std::to_string(o.trials), "--atol",
                        format_float(o.search.atol), "--rtol", format_float(o.search.rtol), "--out", out},
             "verification");
  json v = json::parse(read_file(out));
  v["wall_s"] = seconds_since(start);
  progress.log("verified in " + seconds_text(v["wall_s"]));
  record_end_to_end(p.best, "verify", v);
  print_verify(v);
  if (!v.value("ok", false)) FT_USER_ERROR("ModelNew does not match Model; details in " + p.best);
}

void stage_profile(const Options& o) {
  const Paths p(o);
  const std::string out = path_join(p.work, "profile.json");
  std::remove(out.c_str());
  Progress progress(p.log);
  progress.log("profiling ModelNew, Model and torch.compile");
  const auto start = Clock::now();
  run_python("verify", {"profile", "--model", absolute_path(o.model), "--model-new", path_join(p.out, "model_new.py"),
                        "--seed", std::to_string(o.search.seed), "--out", out},
             "profiling");
  json prof = json::parse(read_file(out));
  prof["wall_s"] = seconds_since(start);
  progress.log("profiled in " + seconds_text(prof["wall_s"]));
  record_end_to_end(p.best, "profile", prof);
  print_profile(prof, json::parse(read_file(p.best)));
}

}  // namespace fusetune
