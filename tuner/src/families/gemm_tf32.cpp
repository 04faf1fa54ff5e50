// The gemm_tf32 family: the TF32 tensor-core template (templates/gemm_tf32.cuh) competing with
// the fp32 gemm family for the same groups, under the tf32 precision policy only.
#include "families.h"

namespace fusetune {

namespace {

class GemmTf32 : public Family {
 public:
  std::string name() const override { return "gemm_tf32"; }
  std::string group_family() const override { return "gemm"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_tf32_kernel<" + p("BM") + ", " + p("BN") + ", " + p("BK") + ", " + p("WM") + ", " + p("WN") +
           ", " + g.op_type() + ">";
  }
  // gemm_launch's geometry with (BM / TM) x (BN / TN) = (4 WM) x (8 WN) = 32 WM WN threads.
  LaunchDims launch(const Group& g, const Config& c) const override {
    const int bm = (int)c.at("BM"), bn = (int)c.at("BN");
    return gemm_launch(bm, bn, bm / (4 * (int)c.at("WM")), bn / (8 * (int)c.at("WN")), g.m, g.n, g.batch);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_launch(" + p("BM") + ", " + p("BN") + ", " + p("BM") + " / (4 * " + p("WM") + "), " + p("BN") +
           " / (8 * " + p("WN") + "), args.m, args.n, args.batch)";
  }
  double flops(const Group& g) const override { return family_by_name("gemm").flops(g); }
  bool allowed(const Config&, const std::string& policy) const override { return policy == "tf32"; }
  std::string precision(const Group&, const Config&) const override { return "tf32"; }
};

}  // namespace

const Family& gemm_tf32_family() {
  static const GemmTf32 f;
  return f;
}

}  // namespace fusetune
