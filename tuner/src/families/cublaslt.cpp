// The cuBLASLt families: a GEMM group's product through cuBLASLt, each algorithm its heuristic
// offers being one candidate, with the per-column bias and a lone ReLU in cuBLASLt's own
// epilogue and the rest of the chain as one generated elementwise pass
// (templates/gemm_epilogue.cuh; none when cuBLASLt covers the whole group and writes the output
// directly). cublaslt_tf32 computes in TF32 (tf32 policy only), cublaslt_fp32 in full fp32, float16
// and bfloat16 operands too (their products are exact in the fp32 sums, so under any policy). The
// extension bakes the winning algorithm (templates/cublaslt_gemm.h).
#include "cublaslt_gemm.h"
#include "families.h"
#include "product_pass.h"

namespace fusetune {

namespace {

// What cuBLASLt does of the group's chain: the product, the per-column bias when the planner
// found one (Group::bias_slot, of the operands' dtype), and a ReLU when that is all there is;
// `pass` when the rest of the chain needs the generated epilogue kernel. cuBLASLt writes its
// product in the operands' dtype, as PyTorch's own product is: without a pass that is the output,
// whose dtype must then be theirs (its rounding, the group's last step where the product's result
// is converted, is cuBLASLt's own); with one the pass reads it.
struct LtPlan {
  cublasLtEpilogue_t epilogue;
  const char* name;
  bool pass;
};

LtPlan lt_plan(const Group& g) {
  const std::string& operands = g.slots.at(0).dtype;
  const bool has_bias = g.bias_slot >= 0;
  const bool anchor_adds = g.ops[0] == "aten.addmm.default" || g.ops[0] == "aten.baddbmm.default";
  std::vector<std::string> chain(g.ops.begin() + 1, g.ops.end());
  if (is_half(operands) && !chain.empty() && chain.back() == "aten._to_copy.default") chain.pop_back();
  // Nothing but the operands, the bias and the one output, of the operands' dtype.
  const bool alone = g.outputs.size() == 1 && g.outputs[0].dtype == operands && g.n_full == 0 &&
                     g.out_slot == 2 + (has_bias ? 1 : 0) && (has_bias || !anchor_adds);
  if (alone && chain.empty())
    return has_bias ? LtPlan{CUBLASLT_EPILOGUE_BIAS, "CUBLASLT_EPILOGUE_BIAS", false}
                    : LtPlan{CUBLASLT_EPILOGUE_DEFAULT, "CUBLASLT_EPILOGUE_DEFAULT", false};
  if (alone && chain == std::vector<std::string>{"aten.relu.default"})
    return has_bias ? LtPlan{CUBLASLT_EPILOGUE_RELU_BIAS, "CUBLASLT_EPILOGUE_RELU_BIAS", false}
                    : LtPlan{CUBLASLT_EPILOGUE_RELU, "CUBLASLT_EPILOGUE_RELU", false};
  return has_bias ? LtPlan{CUBLASLT_EPILOGUE_BIAS, "CUBLASLT_EPILOGUE_BIAS", true}
                  : LtPlan{CUBLASLT_EPILOGUE_DEFAULT, "CUBLASLT_EPILOGUE_DEFAULT", true};
}

// The C++ spelling of lt_data_type's types, for the baked call.
const char* lt_type_text(cudaDataType_t t) {
  return t == CUDA_R_16F ? "CUDA_R_16F" : t == CUDA_R_16BF ? "CUDA_R_16BF" : "CUDA_R_32F";
}

class Cublaslt : public Family {
 public:
  explicit Cublaslt(bool tf32) : tf32_(tf32) {}
  std::string name() const override { return tf32_ ? "cublaslt_tf32" : "cublaslt_fp32"; }
  std::string group_family() const override { return "gemm"; }

  bool supports(const Group& g, std::string& why) const override {
    const std::string& operands = g.slots.at(0).dtype;
    if ((operands != "float32" && !is_half(operands)) || g.slots.at(1).dtype != operands) {
      why = "operands of different dtypes, or neither float32 nor half";
      return false;
    }
    if (tf32_ && operands != "float32") {
      why = "half operands (cublaslt_fp32 multiplies them, in fp32 sums)";
      return false;
    }
    if (g.slots.size() + 2 > (size_t)kMaxSlots) {
      why = "no free kernel-argument slots for the product and the workspace";
      return false;
    }
    KernelArgs a{};
    for (int s = 0; s < 2; ++s)
      for (size_t d = 0; d < 3; ++d) a.stride[s][d] = g.slots[s].layout.strides.at(d);
    a.m = g.m, a.n = g.n, a.k = g.k, a.batch = g.batch;
    if (const char* reason = lt_unsupported(a)) {
      why = reason;
      return false;
    }
    return true;
  }
  bool has_kernel(const Group& g, const Config&) const override { return lt_plan(g).pass; }
  bool measure_first() const override { return true; }
  std::string kernel_header(const std::string&) const override { return "gemm_epilogue.cuh"; }
  json library_call(const Group& g, const Config& c) const override {
    const LtPlan plan = lt_plan(g);
    return json{{"cublaslt",
                 {{"tf32", tf32_}, {"algo", c.at("ALGO")}, {"epilogue", (int)plan.epilogue}, {"epilogue_name", plan.name},
                  {"bias_slot", g.bias_slot}, {"output_slot", plan.pass ? -1 : g.out_slot},
                  {"dtype", g.slots.at(0).dtype}}}};
  }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    // The product is of the operands' type (gemm_epilogue.cuh's PRODUCT codes are gemm_operand_type's).
    return product_pass_instance(g, g.bias_slot >= 0, gemm_operand_type(g));
  }
  LaunchDims launch(const Group& g, const Config& c) const override { return product_pass_launch(g); }
  std::string launch_expr(const Group& g, const ParamText& p) const override { return product_pass_launch_expr(); }

  std::string extension_includes(const Group& g, const std::string& template_file) const override {
    // gemm_epilogue.cuh also defines what the group's Op uses, which the source holds either way.
    return "#define FUSETUNE_CUBLASLT_LINKED\n#include \"" + template_file + "\"\n#include \"gemm_epilogue.cuh\"\n";
  }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    const LtPlan plan = lt_plan(g);
    const std::string product = "args.ptr[" + std::to_string(plan.pass ? g.slots.size() : g.out_slot) + "]";
    const std::string bias = g.bias_slot >= 0 ? "args.ptr[" + std::to_string(g.bias_slot) + "]" : "nullptr";
    // float32 groups' calls are spelled as before half operands were read.
    const cudaDataType_t type = lt_data_type(g.slots.at(0).dtype);
    const std::string type_arg = type == CUDA_R_32F ? "" : std::string(", ") + lt_type_text(type);
    std::string s = "  float* product = " + product + ";\n" + "  static const fusetune::LtBaked lt(args, " +
                    (tf32_ ? "true" : "false") + ", " + plan.name +
                    ", tuned::ALGO_DATA, tuned::CUBLASLT_VERSION, tuned::ALIGNMENT" + type_arg + ");\n" +
                    "  lt.run(args, product, " + bias + ", args.ptr[" + std::to_string(g.slots.size() + 1) + "], stream);\n";
    return plan.pass ? s + product_pass_code(g, g.bias_slot >= 0, gemm_operand_type(g)) : s;
  }
  int64_t scratch_floats(const Group& g) const override {
    if (!lt_plan(g).pass) return 0;
    return is_half(g.slots.at(0).dtype) ? (g.numel() + 1) / 2 : g.numel();  // a half product: two per float
  }
  int64_t workspace_bytes(const Group&) const override { return (int64_t)kCublasLtWorkspaceBytes; }

  double flops(const Group& g) const override { return family_by_name("gemm").flops(g); }
  bool allowed(const Group&, const Config&, const std::string& policy) const override { return !tf32_ || policy == "tf32"; }
  std::string precision(const Group& g, const Config&) const override {
    const std::string half = half_operand_precision(g);
    return !half.empty() ? half : tf32_ ? "tf32" : "fp32";
  }

 private:
  bool tf32_;
};

}  // namespace

const Family& cublaslt_tf32_family() {
  static const Cublaslt f(true);
  return f;
}

const Family& cublaslt_fp32_family() {
  static const Cublaslt f(false);
  return f;
}

}  // namespace fusetune
