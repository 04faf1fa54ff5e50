// Emission of the tuned model: extension/kernels/<group>.cu + <group>_binding.cpp pairs that
// include the very templates the tuner timed, the tuned-constants header made from best.json,
// and model_new.py whose forward calls only the custom ops.
#pragma once
#include <map>
#include <string>

#include "graph.h"
#include "json.h"
#include "plan.h"

namespace fusetune {

// Writes the kernel pairs for every group that is no earlier group's kernel (Group::same_as:
// model_new.py calls that group's op for it), removing any other kernel file, and model_new.py.
// The kernel that won a group's search: its family and template header.
struct KernelChoice {
  std::string family;
  std::string template_file;
};
// `kernels` maps each group id to its winner (best.json's kernel_family and template).
void emit_extension(const Graph& g, const Plan& plan, const std::string& out_dir, const std::string& model_path,
                    const std::map<std::string, KernelChoice>& kernels);
// tuned_constants.h: one namespace per group with the winning parameters as constexpr ints.
std::string tuned_constants_header(const json& best);
std::string op_hash(const Group& g);

}  // namespace fusetune
