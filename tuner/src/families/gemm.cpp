// The gemm family: mm, addmm, bmm, baddbmm and mv as C[b] = A[b] @ B[b] read through strides
// (transposed and broadcast operands cost no copy), with the elementwise epilogue fused.
#include "families.h"
#include "graph.h"
#include "ops.h"

namespace fusetune {

namespace {

// Views an operand as [batch, rows, cols]: 2-D gets a broadcast batch, a vector becomes a column.
bool as_batched(const Layout& l, bool column, Layout& out) {
  out = l;
  if (l.sizes.size() == 1 && column) {
    out.sizes = {1, l.sizes[0], 1};
    out.strides = {0, l.strides[0], 0};
  } else if (l.sizes.size() == 2) {
    out.sizes = {1, l.sizes[0], l.sizes[1]};
    out.strides = {0, l.strides[0], l.strides[1]};
  } else if (l.sizes.size() != 3) {
    return false;
  }
  if (out.sizes[0] == 1) out.strides[0] = 0;
  return true;
}

class Gemm : public Family {
 public:
  std::string name() const override { return "gemm"; }
  bool reads_slot_dims() const override { return true; }
  bool anchors(const std::string& op) const override {
    return op == "aten.mm.default" || op == "aten.addmm.default" || op == "aten.bmm.default" ||
           op == "aten.baddbmm.default" || op == "aten.mv.default";
  }

  bool plan_anchor(const Node& n, const std::vector<int64_t>& out_shape, const LayoutOf& layout_of, Group& g,
                   std::vector<Layout>& operands, std::map<std::string, Layout>& loaded, std::string& why) const override {
    operands.assign(2, Layout{});
    Layout &a = operands[0], &b = operands[1];
    const bool with_bias = n.op == "aten.addmm.default" || n.op == "aten.baddbmm.default";
    const size_t ai = with_bias ? 1 : 0;
    const json &ja = n.args.at(ai), &jb = n.args.at(ai + 1);
    if (!is_value_ref(ja) || !is_value_ref(jb)) { why = "matrix operands must be tensors"; return false; }
    if (!as_batched(layout_of(value_ref(ja)), false, a) || !as_batched(layout_of(value_ref(jb)), true, b)) {
      why = "operands of rank other than 1, 2 or 3";
      return false;
    }
    const int64_t batch = std::max(a.sizes[0], b.sizes[0]);
    if ((a.sizes[0] != batch && a.sizes[0] != 1) || (b.sizes[0] != batch && b.sizes[0] != 1) ||
        a.sizes[2] != b.sizes[1]) {
      why = "operand shapes do not match";
      return false;
    }
    if (batch > 65535) { why = "more than 65535 batches"; return false; }
    g.batch = batch;
    g.m = a.sizes[1];
    g.k = a.sizes[2];
    g.n = b.sizes[2];
    if (with_bias) {
      const json& jbias = n.args.at(0);
      if (!is_value_ref(jbias)) { why = "bias must be a tensor"; return false; }
      auto l = broadcast_to(layout_of(value_ref(jbias)), out_shape);
      if (!l) { why = "bias does not broadcast to the product"; return false; }
      loaded[value_ref(jbias)] = *l;
    }
    return true;
  }

  std::string anchor_expr(const Node& n, const ArgExpr& arg) const override {
    if (n.op != "aten.addmm.default" && n.op != "aten.baddbmm.default") return "x[0]";
    const std::string beta = arg(3, "beta"), alpha = arg(4, "alpha");
    const std::string bias = arg(0, "self");
    return "(" + (beta.empty() ? bias : beta + " * " + bias) + " + " + (alpha.empty() ? "x[0]" : alpha + " * x[0]") + ")";
  }

  // Half operands: read as such and converted (any policy: the fp32 products are exact), the
  // type a last template argument (none for float32).
  std::string precision(const Group& g, const Config&) const override {
    const std::string half = half_operand_precision(g);
    return half.empty() ? "fp32" : half;
  }
  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_kernel<" + p("BM") + ", " + p("BN") + ", " + p("BK") + ", " + p("TM") + ", " + p("TN") +
           ", " + g.op_type() + gemm_operand_arg(g) + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return gemm_launch((int)c.at("BM"), (int)c.at("BN"), (int)c.at("TM"), (int)c.at("TN"), g.m, g.n, g.batch);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    return "fusetune::gemm_launch(" + p("BM") + ", " + p("BN") + ", " + p("TM") + ", " + p("TN") +
           ", args.m, args.n, args.batch)";
  }
  double flops(const Group& g) const override {
    return 2.0 * (double)g.batch * g.m * g.n * g.k + (double)g.numel() * (double)(g.ops.size() - 1);
  }
};

}  // namespace

const Family& gemm_family() {
  static const Gemm f;
  return f;
}

}  // namespace fusetune
