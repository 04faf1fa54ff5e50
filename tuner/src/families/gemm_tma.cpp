// The gemm_tma family: a GEMM group's product on sm_90a tensor cores, float32 operands in TF32
// (tf32 policy only), float16 and bfloat16 ones as they are (any policy: their products are exact
// in the fp32 accumulators), with the group's whole epilogue fused (templates/gemm_tma.cuh). It
// competes with cuBLASLt and the fp32 template in the gemm search. Its operands are TMA tensor
// maps, so it runs only where A is K-major and B too (nn.Linear's x @ W^T) or, for half
// operands, MN-major (a plain A @ B with a row-major B: wgmma transposes 16-bit B tiles; a
// float32 A @ B is left to cuBLASLt), and their strides are whole 16-byte units. The gemm_3xtf32
// family is the same kernel multiplying float32 operands in 3xTF32 (float32's accuracy), under
// either policy.
#include <climits>

#include "families.h"
#include "gemm_tma_split.h"
#include "plan.h"

namespace fusetune {

namespace {

// ", T" for an operand type T other than float32 (the default) among the kernel's and the
// launcher's template arguments.
std::string operand_type_arg(int t) { return t == kGemmTmaFloat32 ? "" : ", " + std::to_string(t); }

// Why operand `slot` ([batch, rows, k] for A, [batch, k, n] for B) cannot be a TMA tensor map.
const char* operand_refused(const Group& g, int slot) {
  const Slot& s = g.slots.at(slot);
  const Layout& l = s.layout;
  if (s.dtype != "float32" && !is_half(s.dtype)) return "operands are neither float32 nor half";
  if (s.dtype != g.slots.at(0).dtype) return "the operands have different dtypes";
  const bool mn_major = slot == 1 && gemm_tma_b_mn(g);
  const int64_t k_stride = slot == 0 ? l.strides.at(2) : l.strides.at(1);
  const int64_t ld = slot == 0 ? l.strides.at(1) : mn_major ? k_stride : l.strides.at(2);
  if (mn_major && l.strides.at(2) != 1 && g.n > 1) return "B is contiguous neither along k nor along n";
  if (!mn_major && k_stride != 1 && g.k > 1)
    return slot == 0 ? "A is not contiguous along k" : "B is not K-major (TF32 wgmma reads both operands along k)";
  const int64_t unit = 16 / dtype_bytes(s.dtype);  // elements of 16 bytes
  if (ld % unit != 0 || ld <= 0) return "an operand's row stride is not a multiple of 16 bytes (TMA)";
  if (l.strides.at(0) % unit != 0) return "an operand's batch stride is not a multiple of 16 bytes";
  if (l.offset % unit != 0) return "an operand does not start on a 16-byte boundary";
  return nullptr;
}

class GemmTma : public Family {
 public:
  // The kernel's OPERAND (gemm_tma_split.h's kGemmTma*).
  virtual int operand(const Group& g) const { return gemm_operand_type(g); }
  // The kernel's and launcher's trailing template arguments: OPERAND (none for float32 in TF32)
  // and, for an MN-major B, B_MN = 1.
  std::string operand_args(const Group& g) const {
    return operand_type_arg(operand(g)) + (gemm_tma_b_mn(g) ? ", 1" : "");
  }
  // STAGES as launch.h counts them: a 3xTF32 stage is two.
  std::string stages(const Group& g, const ParamText& p) const {
    const int units = gemm_tma_stage_units(operand(g));
    return units == 1 ? p("STAGES") : std::to_string(units) + " * " + p("STAGES");
  }

  std::string name() const override { return "gemm_tma"; }
  std::string group_family() const override { return "gemm"; }
  std::string arch(const std::string& target) const override {
    return target == "sm_90" || target == "sm_90a" ? "sm_90a" : "";  // wgmma and setmaxnreg: sm_90a only
  }

  bool supports(const Group& g, std::string& why) const override {
    for (int slot : {0, 1})
      if (const char* reason = operand_refused(g, slot)) {
        why = reason;
        return false;
      }
    // Tile indices and TMA coordinates are 32-bit; the smallest tile is 64 x 64.
    const long long tiles = g.batch * ((g.m + 63) / 64) * ((g.n + 63) / 64);
    if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX || tiles > INT_MAX) {
      why = "more rows, columns or tiles than 32-bit coordinates address";
      return false;
    }
    return true;
  }
  bool multiplies_half(const Group& g) const override {
    std::string why;
    return gemm_operand_type(g) != kGemmTmaFloat32 && supports(g, why);
  }
  bool allowed(const Group& g, const Config&, const std::string& policy) const override {
    return policy == "tf32" || gemm_operand_type(g) != kGemmTmaFloat32;
  }
  std::string precision(const Group& g, const Config&) const override {
    const std::string half = half_operand_precision(g);
    return half.empty() ? "tf32" : half;
  }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_tma_kernel<" + p("BM") + ", " + p("BN") + ", " + p("STAGES") + ", " + p("GROUP_M") + ", " +
           p("PINGPONG") + ", " + p("CLUSTER") + ", " + g.op_type() + operand_args(g) + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return gemm_tma_launch((int)c.at("BM"), (int)c.at("BN"), (int)c.at("STAGES") * gemm_tma_stage_units(operand(g)),
                           (int)c.at("CLUSTER"), g.m, g.n, g.batch);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_tma_launch(" + p("BM") + ", " + p("BN") + ", " + stages(g, p) + ", " + p("CLUSTER") +
           ", args.m, args.n, args.batch)";
  }
  // Each block of a cluster loads BN / CLUSTER rows of B (MN-major: k-tile / CLUSTER rows of each
  // 64-column block) and multicasts them; the grid and the split tail's workspace are
  // gemm_tma_grid's (the worker's and the extension's alike).
  json launch_extras(const Group& g, const Config& c) const override {
    const bool b_mn = gemm_tma_b_mn(g);
    const int b_rows = gemm_tma_b_box_rows((int)c.at("BN"), (int)c.at("CLUSTER"), gemm_operand_type(g), b_mn);
    json extras = {{"tensor_maps", {c.at("BM"), b_rows}},
                   {"persistent", true},
                   {"cluster", c.at("CLUSTER")},
                   {"split_tail", {{"bm", c.at("BM")}, {"bn", c.at("BN")}}}};
    if (const int t = gemm_operand_type(g); t != kGemmTmaFloat32) {  // half operands: their k-tiles
      extras["tensor_map_type"] = t;
      extras["split_tail"]["k_tile"] = gemm_tma_k_tile(t);
    }
    if (b_mn) extras["tensor_map_b_mn"] = true;
    return extras;
  }
  std::string extension_includes(const Group& g, const std::string& template_file) const override {
    return "#define FUSETUNE_TMA_LAUNCH\n#include \"" + template_file + "\"\n#include \"tma_map.h\"\n";
  }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    return "  fusetune::launch_gemm_tma<&" + kernel_instance(g, p) + ", " + p("BM") + ", " + p("BN") + ", " + p("STAGES") +
           ", " + p("CLUSTER") + operand_args(g) + ">(args, stream);\n";
  }
  double flops(const Group& g) const override { return family_by_name("gemm").flops(g); }
};

// float32 operands as 3xTF32: float32's accuracy on tensor cores, so under either policy
// (the check against PyTorch at the run's tolerance decides, as for every candidate). Its
// tensor maps are float32 ones, as gemm_tma's.
class GemmTma3xTf32 : public GemmTma {
 public:
  std::string name() const override { return "gemm_3xtf32"; }
  int operand(const Group&) const override { return kGemmTma3xTF32; }
  bool supports(const Group& g, std::string& why) const override {
    if (gemm_operand_type(g) != kGemmTmaFloat32) {
      why = "half operands (16-bit tensor cores multiply them exactly)";
      return false;
    }
    return GemmTma::supports(g, why);
  }
  bool multiplies_half(const Group&) const override { return false; }
  bool allowed(const Group&, const Config&, const std::string&) const override { return true; }
  std::string precision(const Group&, const Config&) const override { return "3xtf32"; }
};

}  // namespace

bool gemm_tma_b_mn(const Group& g) {
  const Slot& b = g.slots.at(1);
  return is_half(b.dtype) && g.k > 1 && b.layout.strides.at(1) != 1;
}

int gemm_operand_type(const Group& g) {
  static_assert(kGemmTmaFloat32 == 0 && kGemmTmaFloat16 == 1 && kGemmTmaBfloat16 == 2, "half_kind's codes");
  return half_kind(g.slots.at(0).dtype);
}

std::string gemm_operand_arg(const Group& g) { return operand_type_arg(gemm_operand_type(g)); }

std::string half_operand_precision(const Group& g) {
  const int t = gemm_operand_type(g);
  return t == kGemmTmaFloat32 ? "" : t == kGemmTmaFloat16 ? "fp16" : "bf16";
}

const Family& gemm_tma_family() {
  static const GemmTma f;
  return f;
}

const Family& gemm_3xtf32_family() {
  static const GemmTma3xTf32 f;
  return f;
}

}  // namespace fusetune
