// The reduce family: sum, mean, amax and amin over any set of dimensions (keepdim or not) of a
// strided input, with the elementwise chain on the reduced values fused (templates/reduce.cuh).
// Two kernels compete: a block per output (long contiguous rows) and a thread per output (outer
// or middle dimensions). First version for issue 5: the chain before a reduction is not fused
// into its loads yet (its value is written to memory first).
#include "families.h"
#include "graph.h"
#include "reduce_launch.h"

namespace fusetune {

namespace {

// The reduction the group's anchor performs: 0 sum, 1 mean, 2 max, 3 min (templates/reduce.cuh).
int reduce_kind(const Group& g) {
  const std::string& op = g.ops.at(0);
  if (op.rfind("aten.mean.", 0) == 0) return 1;
  if (op == "aten.amax.default") return 2;
  if (op == "aten.amin.default") return 3;
  return 0;
}

// Whether the reduced view (slot 1) is one stride-1 run: element r lives at offset r.
bool reduced_contiguous(const Group& g) {
  const Layout& l = g.slots.at(1).layout;
  int64_t expect = 1;
  for (int d = (int)l.sizes.size() - 1; d >= 0; --d) {
    if (l.sizes[d] == 1) continue;
    if (l.strides[d] != expect) return false;
    expect *= l.sizes[d];
  }
  return true;
}

// What both reduction kernels share: the group, its flop count and the launch header.
class ReduceKernel : public Family {
 public:
  std::string group_family() const override { return "reduce"; }
  std::string extension_includes(const Group& g, const std::string& template_file) const override {
    return "#include \"" + template_file + "\"\n#include \"reduce_launch.h\"\n";
  }
  double flops(const Group& g) const override {
    return (double)g.m * (double)g.k + (double)g.numel() * (double)(g.ops.size() - 1);
  }
};

class Reduce : public ReduceKernel {
 public:
  std::string name() const override { return "reduce"; }
  bool anchors(const std::string& op) const override {
    return op == "aten.sum.dim_IntList" || op == "aten.sum.default" || op == "aten.mean.dim" ||
           op == "aten.mean.default" || op == "aten.amax.default" || op == "aten.amin.default";
  }

  // a: the input over the kept dimensions (output order), b: over the reduced ones.
  bool plan_anchor(const Node& n, const std::vector<int64_t>& out_shape, const LayoutOf& layout_of, Group& g,
                   Layout& a, Layout& b, std::map<std::string, Layout>& loaded, std::string& why) const override {
    if (!is_value_ref(n.args.at(0))) { why = "the input must be a tensor"; return false; }
    const Layout& in = layout_of(value_ref(n.args.at(0)));
    const int64_t rank = (int64_t)in.sizes.size();
    const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
    if (!dtype.is_null() && dtype.value("dtype", "") != "float32") { why = "only float32 results"; return false; }
    const bool everything = n.op == "aten.sum.default" || n.op == "aten.mean.default";
    const json& dims = everything ? json() : node_arg(n, 1, "dim");
    std::vector<bool> reduced(rank, dims.is_null() || (dims.is_array() && dims.empty()));
    for (const json& d : dims.is_array() ? dims : json::array()) {
      if (!is_number(d)) { why = "dimensions must be constants"; return false; }
      const int64_t dim = (int64_t)number(d) < 0 ? (int64_t)number(d) + rank : (int64_t)number(d);
      if (dim < 0 || dim >= rank) { why = "dimension out of range"; return false; }
      reduced[dim] = true;
    }
    a = Layout{in.base, {}, {}, in.offset};
    b = Layout{in.base, {}, {}, in.offset};
    for (int64_t d = 0; d < rank; ++d) {
      Layout& l = reduced[d] ? b : a;
      l.sizes.push_back(in.sizes[d]);
      l.strides.push_back(in.strides[d]);
    }
    g.m = a.numel();
    g.k = b.numel();
    return true;
  }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_kernel<" + p("BLOCK") + ", " + p("ILP") + ", " + std::to_string(reduce_kind(g)) + ", " +
           (reduced_contiguous(g) ? "true" : "false") + ", " + g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_launch((int)c.at("BLOCK"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_launch(" + p("BLOCK") + ", args.numel)";
  }
};

// One thread per output (reduce_thread_kernel), competing for the same groups.
class ReduceThread : public ReduceKernel {
 public:
  std::string name() const override { return "reduce_thread"; }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_thread_kernel<" + p("BLOCK") + ", " + std::to_string(reduce_kind(g)) + ", " + g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return reduce_thread_launch((int)c.at("BLOCK"), g.numel());
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::reduce_thread_launch(" + p("BLOCK") + ", args.numel)";
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
