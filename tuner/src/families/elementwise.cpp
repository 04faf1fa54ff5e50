// The elementwise family: a fused chain with no anchor, one thread per VEC * ILP elements.
#include "families.h"

namespace fusetune {

namespace {

class Elementwise : public Family {
 public:
  std::string name() const override { return "elementwise"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::elementwise_kernel<" + p("BLOCK") + ", " + p("VEC") + ", " + p("ILP") + ", " + p("MATH") + ", " +
           g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return elementwise_launch((int)c.at("BLOCK"), (int)c.at("VEC"), (int)c.at("ILP"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::elementwise_launch(" + p("BLOCK") + ", " + p("VEC") + ", " + p("ILP") + ", args.numel)";
  }
  double flops(const Group& g) const override { return (double)g.numel() * (double)g.ops.size(); }
  // VEC 1 only for pooling, whose taps are loads of their own rather than vectors of the index
  // space (it won avgpool3d by 1%, docs/PERF.md); loads of whole vectors are better elsewhere.
  bool allowed(const Group& g, const Config& c, const std::string& policy) const override {
    return math_allowed(g, c, policy) && (c.at("VEC") > 1 || g.op_struct.find("fusetune::pool<") != std::string::npos);
  }
  std::string precision(const Group&, const Config& c) const override {
    return c.at("MATH") ? "fp32 (approximate transcendentals)" : "fp32";
  }
};

}  // namespace

const Family& elementwise_family() {
  static const Elementwise f;
  return f;
}

}  // namespace fusetune
