// results/best.json: the review artifact. Schema (version 1) is documented in the README:
// fingerprint, options, per group the winner and every candidate's outcome, end to end timings.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph.h"
#include "json.h"
#include "plan.h"
#include "search.h"

namespace fusetune {

struct Options;

constexpr int kSchemaVersion = 1;

// sha256 of every file in the template folders (a change in any header invalidates results).
json template_hashes(const std::vector<std::string>& dirs);

// The peak FLOP rate of a precision on the device best.json's fingerprint describes: fp32 FMA
// ("fp32"), TF32 tensor cores ("tf32"), 16-bit tensor cores ("fp16", "bf16"); 0 where unknown.
double peak_flops(const json& device, const std::string& precision);

json make_best_json(const Options& o, const Graph& g, const Plan& plan, json groups, const SearchContext& ctx,
                    const std::map<std::string, int64_t>& value_numel);

// Refuses (UserError) a best.json made for another schema, arch, GPU or model file.
void check_fingerprint(const json& best, const Options& o);
// Refuses kernel sources that are missing, were generated for another plan, or include a
// template (found in template_dirs) that differs from the one best.json recorded.
void check_kernel_sources(const json& best, const std::string& kernels_dir, const std::vector<std::string>& template_dirs);

// Stores a verify or profile result under end_to_end in best.json (atomically).
void record_end_to_end(const std::string& best_path, const std::string& key, const json& value);
void print_verify(const json& v);
void print_profile(const json& prof, const json& best);

}  // namespace fusetune
