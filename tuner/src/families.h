// Kernel families: each one is a template header in templates/, a search space in
// configs/<family>.json (which names the header) and the rules below (what it anchors, how it
// launches). Adding a family means adding one of these, not touching the pipeline.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fusetune_args.h"
#include "json.h"
#include "launch.h"
#include "ops.h"
#include "plan.h"
#include "space.h"

namespace fusetune {

using LayoutOf = std::function<const Layout&(const std::string& value)>;
// A parameter's value in generated code: a number for the tuner, a constant name for the extension.
using ParamText = std::function<std::string(const std::string& param)>;

class Family {
 public:
  virtual ~Family() = default;
  virtual std::string name() const = 0;
  // The planner family whose groups this family's kernels run (its own name, or e.g. "gemm" for
  // another GEMM template competing in the same search).
  virtual std::string group_family() const { return name(); }
  // Planner rule: ops that start a group of this family (none for plain elementwise chains).
  virtual bool anchors(const std::string& op) const { return false; }
  // Fills the group's operands (a and b, or q, k and v: the first slots) and problem size for
  // anchor node n and records the other tensors the anchor reads; returns false with `why` when
  // this form is not supported.
  virtual bool plan_anchor(const Node& n, const std::vector<int64_t>& out_shape, const LayoutOf& layout_of,
                           Group& g, std::vector<Layout>& operands, std::map<std::string, Layout>& loaded,
                           std::string& why) const {
    why = "not an anchor";
    return false;
  }
  // Planner rule: whether elementwise ops over the anchor's output may join its group (its kernel
  // then applies them as it stores); false keeps the group to the anchor alone.
  virtual bool takes_epilogue() const { return true; }
  // Planner rule: whether the kernels of this family's groups read their slots' sizes and strides
  // from KernelArgs (GEMM and convolution operands; at most kMaxRank dimensions, so a deeper slot
  // there is an internal error). Other kernels have every offset as literals.
  virtual bool reads_slot_dims() const { return false; }
  // The anchor's own elementwise part (e.g. addmm's beta * bias + alpha * product); x[0] is the product.
  virtual std::string anchor_expr(const Node& n, const ArgExpr& arg) const { return "x[0]"; }
  // The kernel instance, e.g. fusetune::gemm_kernel<64, 64, 8, 4, 4, fusetune_gen::g0_op>.
  virtual std::string kernel_instance(const Group& g, const ParamText& p) const = 0;
  virtual LaunchDims launch(const Group& g, const Config& c) const = 0;
  // C++ expression computing the LaunchDims in the extension, in terms of `args` and p().
  virtual std::string launch_expr(const Group& g, const ParamText& p) const = 0;
  virtual double flops(const Group& g) const = 0;
  // Whether config c may run group g under the precision policy (tf32 or fp32).
  virtual bool allowed(const Group& g, const Config& c, const std::string& policy) const { return true; }
  // Precision of the winning config's arithmetic (recorded with every result).
  virtual std::string precision(const Group& g, const Config& c) const { return "fp32"; }

  // Whether this family can run group g at all; `why` says why not.
  virtual bool supports(const Group& g, std::string& why) const { return true; }
  // Whether it multiplies group g's half operands (slots 0 and 1) as they are, on 16-bit tensor
  // cores: the planner then keeps them in half instead of converting them to float32 first.
  virtual bool multiplies_half(const Group& g) const { return false; }
  // The architecture NVRTC compiles this family's kernels for when fusetune targets `target`
  // (sm_90a where a kernel uses sm_90's architecture-specific instructions), or empty when the
  // family cannot run on `target` at all.
  virtual std::string arch(const std::string& target) const { return target; }
  // What the measuring worker needs to launch the kernel besides grid, block and shared memory
  // (tensor maps, a persistent grid), merged into the candidate's job entry; null for nothing.
  virtual json launch_extras(const Group& g, const Config& c) const { return nullptr; }
  // Whether candidate c includes an NVRTC-compiled kernel (kernel_instance); a library call alone does not.
  virtual bool has_kernel(const Group& g, const Config& c) const { return true; }
  // The header that defines kernel_instance (for NVRTC): the space's template unless that is host code.
  virtual std::string kernel_header(const std::string& template_file) const { return template_file; }
  // Whether the search measures this family's candidates before the others (a library's fast,
  // reliable times let slower candidates stop after their warm-up).
  virtual bool measure_first() const { return false; }
  // What the measuring worker calls besides the kernel, e.g. {"cublaslt": {...}}; null for none.
  virtual json library_call(const Group& g, const Config& c) const { return nullptr; }
  // The extension source's includes (the template header and what it needs).
  virtual std::string extension_includes(const Group& g, const std::string& template_file) const {
    return "#include \"" + template_file + "\"\n";
  }
  // Body of the extension's `void fusetune_launch_<id>(const KernelArgs& args, cudaStream_t stream)`,
  // with the tuned constants named by p() in namespace `tuned`.
  virtual std::string extension_launch(const Group& g, const ParamText& p) const {
    return "  const fusetune::LaunchDims d = " + launch_expr(g, p) + ";\n  " + kernel_instance(g, p) +
           "<<<dim3(d.grid[0], d.grid[1], d.grid[2]), dim3(d.block[0], d.block[1], d.block[2]), d.shared_bytes, stream>>>(args);\n";
  }
  // Memory the binding passes after the group's slots: slot slots.size() holds scratch_floats(g)
  // floats allocated per call, the next one a workspace of workspace_bytes(g) kept per device,
  // zeroed when it is allocated (a kernel that counts in it must leave it zeroed).
  virtual int64_t scratch_floats(const Group& g) const { return 0; }
  virtual int64_t workspace_bytes(const Group& g) const { return 0; }
};

const Family& family_by_name(const std::string& name);
// The extension's statement opting family f's kernel for group g in to the dynamic shared memory
// its launch asks for (over 48 KB is an opt-in), once per kernel: the shapes are fixed. The
// measuring worker opts in for any candidate that asks for more.
std::string shared_memory_opt_in(const Family& f, const Group& g, const ParamText& p);
// The first family running groups of planner family `group_family`: its rules (anchor, FLOPs)
// are every such family's.
const Family& planner_family(const std::string& group_family);
const Family* family_anchoring(const std::string& op);
// Every family whose kernels can run group g on architecture `arch` (they compete in its
// search); `refused` gets "family: why" for each one of the group's planner family that cannot.
std::vector<const Family*> families_for(const Group& g, const std::string& arch, std::vector<std::string>* refused = nullptr);
std::vector<const Family*> all_families();

// Whether MATH 1 may run group g under `policy`: only where the group's Op has arithmetic that MATH
// changes (an exponential, a division by a per-row value: `name<MATH>(`); elsewhere it would time
// the same kernel twice.
bool math_allowed(const Group& g, const Config& c, const std::string& policy);

// The KernelArgs a group's kernel takes, given each slot's base pointer on the device (the
// measuring worker's buffers; the generated bindings fill the same fields from their tensors).
KernelArgs kernel_args(const Group& g, const std::vector<float*>& slot_base);

// The element type of a GEMM group's operands (both of one dtype), numbered as
// templates/gemm_tma_split.h's kGemmTma*: 0 float32, 1 float16, 2 bfloat16.
int gemm_operand_type(const Group& g);
// A GEMM kernel instance's last template argument for that type (", 1", ", 2"; none for
// float32, whose instances read as before the type was a parameter), and the precision of half
// operands' products ("fp16", "bf16"; "" for float32, whose precision is the family's).
std::string gemm_operand_arg(const Group& g);
std::string half_operand_precision(const Group& g);
// Whether the TMA GEMM reads B MN-major (half operands whose B is not contiguous along k: a plain
// A @ B); its family refuses such a B unless it is contiguous along n.
bool gemm_tma_b_mn(const Group& g);

// Whether group g's first `count` slots (its anchor's operands) are float32; `why` says not.
bool operands_float32(const Group& g, int count, std::string& why);

// Whether slot layout l's sizes and strides go into KernelArgs (at most kMaxRank dimensions).
// Only groups whose planner family reads_slot_dims need them; other slots may have more
// dimensions (an einsum's broadcast products), left out of KernelArgs.
bool slot_dims_fit(const Group& g, const Layout& l);

}  // namespace fusetune
