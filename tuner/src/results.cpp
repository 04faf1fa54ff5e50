// results/best.json: building, fingerprint checks, end-to-end records and the printed tables.
#include "results.h"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

#include "compile.h"
#include "driver.h"
#include "emit.h"
#include "error.h"
#include "families.h"
#include "pipeline.h"
#include "util.h"

namespace fusetune {

json template_hashes(const std::vector<std::string>& dirs) {
  json h = json::object();
  for (const auto& d : dirs)
    for (const auto& suffix : {".cuh", ".h"})
      for (const auto& f : list_files(d, suffix))
        if (!h.contains(f)) h[f] = sha256_hex(read_file(path_join(d, f)));
  return h;
}

double peak_flops(const json& device, const std::string& precision) {
  if (precision == "3xtf32") return device.value("tf32_peak_tflops", 0.0) * 1e12 / 3;  // three TF32 products each
  const char* key = precision.rfind("tf32", 0) == 0                    ? "tf32_peak_tflops"
                    : precision == "fp16" || precision == "bf16" ? "half_peak_tflops"
                                                                 : "fp32_peak_tflops";
  return device.value(key, 0.0) * 1e12;
}

namespace {

// Each candidate's floor: its FLOPs at the peak of its precision (fp32 FMA, TF32 or 16-bit tensor
// cores) or its bytes at the copy rate, whichever is larger; the group's is its winner's.
void add_roofline(json& group, const Group& g, const json& device, const std::map<std::string, int64_t>& numel) {
  const Family& f = planner_family(g.family);
  const double flops = f.flops(g), bytes = (double)g.bytes_moved(numel);
  const double bw = device.value("copy_bandwidth_gbps", 0.0) * 1e9;
  group["flops"] = flops;
  group["bytes"] = bytes;
  auto peak = [&](const json& c) { return peak_flops(device, c.value("precision", "fp32")); };
  auto floor_ms = [&](const json& c) { return std::max(flops / peak(c), bytes / bw) * 1e3; };
  if (peak(group) <= 0 || bw <= 0) return;
  group["floor_ms"] = floor_ms(group);
  group["bound"] = flops / peak(group) > bytes / bw ? "compute" : "memory";
  auto pct = [&](json& c, const json& precision_of) {
    if (c.contains("time_ms")) c["roofline_pct"] = 100.0 * floor_ms(precision_of) / c["time_ms"]["median"].get<double>();
  };
  for (json& c : group["candidates"]) pct(c, c);
  if (!group["best"].is_null()) pct(group["best"], group);
}

}  // namespace

json make_best_json(const Options& o, const Graph& g, const Plan& plan, json groups, const SearchContext& ctx,
                    const std::map<std::string, int64_t>& value_numel) {
  json configs = json::object();
  for (const Family* f : all_families()) {
    const std::string path = path_join(o.configs_dir, f->name() + ".json");
    if (file_exists(path)) configs[f->name() + ".json"] = sha256_hex(read_file(path));
  }
  json fp = {{"model", {{"file", base_name(o.model)}, {"sha256", g.model_sha256}, {"init_args", g.init_args},
                        {"training", g.training}}},
             {"arch", o.arch},
             {"gpu", ctx.device},
             {"nvrtc_version", Compiler::nvrtc_version()},
             {"torch_version", g.torch_version},
             {"templates", template_hashes(ctx.template_dirs)},
             {"configs", configs}};
  json opts = {{"precision", o.precision}, {"atol", o.search.atol}, {"rtol", o.search.rtol}, {"seed", o.search.seed},
               {"budget_candidates", o.search.budget_candidates}, {"budget_seconds", o.search.budget_seconds},
               {"candidate_timeout_s", o.search.candidate_timeout_s}, {"workers", o.search.workers}};
  double tuning_s = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    add_roofline(groups[i], plan.groups[i], ctx.device, value_numel);
    groups[i]["op_hash"] = op_hash(plan.groups[i]);
    tuning_s += groups[i]["search"]["wall_s"].get<double>();
  }
  return json{{"schema_version", kSchemaVersion}, {"tool", "fusetune"}, {"fingerprint", fp}, {"options", opts},
              {"tuning_wall_s", tuning_s}, {"outputs", plan.outputs}, {"groups", groups},
              {"end_to_end", json::object()}};
}

void check_fingerprint(const json& best, const Options& o) {
  if (best.value("schema_version", 0) != kSchemaVersion)
    FT_USER_ERROR("best.json has schema version " + best.value("schema_version", json(0)).dump() + "; this fusetune reads " +
                  std::to_string(kSchemaVersion));
  const json& fp = best.at("fingerprint");
  const std::string arch = fp.at("arch");
  if (arch != o.arch) FT_USER_ERROR("best.json was tuned for " + arch + ", not --arch " + o.arch + ": run fusetune again");
  if (!file_exists(o.model)) FT_USER_ERROR("model file " + o.model + " does not exist");
  if (sha256_hex(read_file(o.model)) != fp.at("model").at("sha256"))
    FT_USER_ERROR(o.model + " changed since best.json was tuned (sha256 differs): run fusetune again");
  const std::string gpu = fp.at("gpu").value("name", "");
  if (Driver::available()) {
    const DeviceInfo dev = query_device(0);
    if (dev.name != gpu) FT_USER_ERROR("best.json was tuned on " + gpu + ", this machine has " + dev.name + ": run fusetune again");
  } else {
    std::fprintf(stderr, "note: no GPU here; best.json was tuned on %s and its GPU is not checked\n", gpu.c_str());
  }
}

namespace {

// Adds to `found` (file name -> path) every template header `source` includes, directly or
// through other templates; headers outside the template folders (CUDA's, torch's) are skipped.
void add_included_templates(const std::string& source, const std::vector<std::string>& dirs,
                            std::map<std::string, std::string>& found) {
  static const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, include) || found.count(m[1])) continue;
    for (const auto& d : dirs) {
      const std::string path = path_join(d, m[1]);
      if (!file_exists(path)) continue;
      found[m[1]] = path;
      add_included_templates(read_file(path), dirs, found);
      break;
    }
  }
}

}  // namespace

void check_kernel_sources(const json& best, const std::string& kernels_dir, const std::vector<std::string>& template_dirs) {
  const json& recorded = best.at("fingerprint").at("templates");
  for (const json& gr : best.at("groups")) {
    if (gr.contains("same_as")) continue;  // it runs that group's kernel, checked with that group
    const std::string id = gr.at("id"), cu = path_join(kernels_dir, id + ".cu");
    const std::string binding = path_join(kernels_dir, id + "_binding.cpp");
    if (!file_exists(cu) || !file_exists(binding))
      FT_USER_ERROR("kernel sources of group " + id + " are missing in " + kernels_dir + ": run fusetune again");
    const std::string source = read_file(cu);
    if (source.find("op hash: " + gr.at("op_hash").get<std::string>()) == std::string::npos)
      FT_USER_ERROR(cu + " was generated for another plan than best.json: run fusetune again");
    const std::string family = gr.at("kernel_family");
    if (source.find("kernel family " + family + ",") == std::string::npos)
      FT_USER_ERROR(cu + " was generated for another kernel family than best.json's " + family + ": run fusetune again");
    // The templates this kernel is built from must be the ones it was timed with.
    std::map<std::string, std::string> used;
    add_included_templates(source, template_dirs, used);
    for (const auto& [name, path] : used)
      if (!recorded.contains(name) || recorded[name] != sha256_hex(read_file(path)))
        FT_USER_ERROR("template " + name + " (used by " + id + ") changed since best.json was tuned: run fusetune again");
  }
}

void record_end_to_end(const std::string& best_path, const std::string& key, const json& value) {
  json best = json::parse(read_file(best_path));
  best["end_to_end"][key] = value;
  write_file_atomic(best_path, best.dump(1));
}

void print_verify(const json& v) {
  std::printf("\nverification (%zu trials, atol %s, rtol %s): %s\n", v.value("trials", json::array()).size(),
              v.value("atol", json(0)).dump().c_str(), v.value("rtol", json(0)).dump().c_str(),
              v.value("ok", false) ? "PASS" : "FAIL");
  std::printf("  state_dict from Model loads: %s\n", v.value("state_dict_loads", false) ? "yes" : "no");
  for (const json& t : v.value("trials", json::array()))
    std::printf("  seed %-8s max |err| %-12s rel L2 %-12s %s\n", t.value("seed", json()).dump().c_str(),
                t.value("max_abs_err", json()).dump().c_str(), t.value("rel_l2", json()).dump().c_str(),
                t.value("ok", false) ? "ok" : "MISMATCH");
}

void print_profile(const json& prof, const json& best) {
  const json& t = prof.at("timings");
  const double ours = t.at("fusetune").at("median").get<double>();
  std::string precision;
  for (const json& g : best.at("groups"))
    precision += (precision.empty() ? "" : ", ") + g.at("id").get<std::string>() + " " + g.value("precision", "?");
  const json per_round = prof.value("speedup_per_round", json::object());
  std::printf("\nend to end on %s (median of timed calls, L2 flushed, the contenders in turns):\n",
              prof.value("gpu", "?").c_str());
  std::printf("  %-34s %10s %14s %10s\n", "", "ms", "fusetune speedup", "per round");
  const std::pair<const char*, const char*> rows[] = {
      {"eager", "eager PyTorch"}, {"compile", "torch.compile (default, fp32 matmul)"},
      {"compile_tf32", "torch.compile with TF32 matmul"}};
  for (const auto& [key, label] : rows) {
    const double ms = t.at(key).at("median").get<double>();
    const json paired = per_round.value(std::string("vs_") + key, json());
    char round_text[32] = "-";  // a best.json from before the per-round ratio has none
    if (paired.is_number()) std::snprintf(round_text, sizeof round_text, "%.2fx", paired.get<double>());
    std::printf("  %-34s %10.4f %13.2fx %10s\n", label, ms, ms / ours, round_text);
  }
  std::printf("  %-34s %10.4f   (precision: %s)\n", "fusetune ModelNew", ours, precision.c_str());
}

}  // namespace fusetune
