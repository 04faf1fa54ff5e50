// The reduce family: row groups (a reduction over any dimensions with the chain before it fused
// into its loads and the chains after it fused, per row and per element; templates/reduce.cuh).
// Two kernels compete: a block per row (long contiguous rows) and a block of neighbouring rows
// with a few threads each, which can keep short rows in registers between passes (rows along
// outer or middle dimensions, where neighbouring rows are neighbours in memory).
#include "families.h"
#include "reduce_launch.h"

namespace fusetune {

namespace {

// What both kernels share: the planner family, the flop count, the launch header and the
// transcendental arithmetic (MATH) under the precision policy.
class ReduceKernel : public Family {
 public:
  std::string group_family() const override { return "reduce"; }
  std::string extension_includes(const Group& g, const std::string& template_file) const override {
    return "#include \"" + template_file + "\"\n#include \"reduce_launch.h\"\n";
  }
  double flops(const Group& g) const override { return (double)g.m * (double)g.k * (double)g.ops.size(); }
  bool allowed(const Config& c, const std::string& policy) const override { return policy != "fp32" || c.at("MATH") == 0; }
  std::string precision(const Group&, const Config& c) const override {
    return c.at("MATH") ? "fp32 (approximate transcendentals)" : "fp32";
  }
};

class Reduce : public ReduceKernel {
 public:
  std::string name() const override { return "reduce"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_kernel<" + p("BLOCK") + ", " + p("ILP") + ", " + p("VEC") + ", " + p("MATH") + ", " +
           g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_launch((int)c.at("BLOCK"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_launch(" + p("BLOCK") + ", args.numel)";
  }
};

class ReduceThread : public ReduceKernel {
 public:
  std::string name() const override { return "reduce_thread"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_thread_kernel<" + p("ROWS") + ", " + p("SPLIT") + ", " + p("CACHE") + ", " + p("MATH") + ", " +
           g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_thread_launch((int)c.at("ROWS"), (int)c.at("SPLIT"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_thread_launch(" + p("ROWS") + ", " + p("SPLIT") + ", args.numel)";
  }
};

}  // namespace

const Family& reduce_family() {
  static const Reduce f;
  return f;
}

const Family& reduce_thread_family() {
  static const ReduceThread f;
  return f;
}

}  // namespace fusetune
