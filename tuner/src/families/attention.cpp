// The attention family: scaled_dot_product_attention without a mask tensor (causal or not) as one
// kernel (templates/attention.cuh): the scores stay in registers, the softmax is taken online,
// and the group's elementwise epilogue is fused. Q, K and V are [batch, heads, seq, D] views
// (3-D ones get a head dimension of size 1) read through their strides. Capture keeps SDPA as
// one op only in the forms this family runs (decompose.py: _attention); the others are written
// out into products and a softmax.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "attention_launch.h"
#include "families.h"
#include "graph.h"

namespace fusetune {

namespace {

constexpr const char* kAttention = "aten.scaled_dot_product_attention.default";
constexpr int64_t kMaxHeadDim = 128;

// [batch, heads, seq, D] of a 3-D or 4-D operand.
bool as_heads(const Layout& l, Layout& out) {
  out = l;
  if (l.sizes.size() == 3) {
    out.sizes.insert(out.sizes.begin() + 1, 1);
    out.strides.insert(out.strides.begin() + 1, 0);
  } else if (l.sizes.size() != 4) {
    return false;
  }
  for (size_t d = 0; d < 2; ++d)
    if (out.sizes[d] == 1) out.strides[d] = 0;
  return true;
}

// The kernel's OUT_RANK: 0 where every output is stored contiguous, else the rank its outputs'
// strides are read with (a permuted output: Planner::materialize_permuted).
int out_rank(const Group& g) {
  for (const Slot& s : g.slots)
    if (s.access == Access::Output && !s.layout.is_contiguous()) return (int)g.index_shape.size();
  return 0;
}

// The shared memory a block of sm_90 may opt in to.
constexpr int64_t kMaxSharedBytes = 227 * 1024;

class Attention : public Family {
 public:
  std::string name() const override { return "attention"; }
  bool reads_slot_dims() const override { return true; }
  bool anchors(const std::string& op) const override { return op == kAttention; }

  bool plan_anchor(const Node& n, const std::vector<int64_t>&, const LayoutOf& layout_of, Group& g,
                   std::vector<Layout>& operands, std::map<std::string, Layout>&, std::string& why) const override {
    operands.assign(3, Layout{});
    for (size_t i = 0; i < 3; ++i) {
      const json& j = n.args.at(i);
      if (!is_value_ref(j)) { why = "q, k and v must be tensors"; return false; }
      if (!as_heads(layout_of(value_ref(j)), operands[i])) { why = "q, k and v of rank other than 3 or 4"; return false; }
    }
    const Layout &q = operands[0], &k = operands[1], &v = operands[2];
    const json &mask = node_arg(n, 3, "attn_mask"), &dropout = node_arg(n, 4, "dropout_p"),
               &causal = node_arg(n, 5, "is_causal"), &scale = node_arg(n, 6, "scale"), &gqa = node_arg(n, 7, "enable_gqa");
    if (!mask.is_null() || !(dropout.is_null() || (is_number(dropout) && number(dropout) == 0.0))) {
      why = "a mask tensor and dropout are written out by capture, not fused";
      return false;
    }
    // Grouped heads (enable_gqa, 4-D only): q's head h reads k's and v's head h / (q's heads /
    // theirs), which the kernel computes; otherwise k and v broadcast over q's heads.
    const bool grouped = gqa.is_boolean() && gqa.get<bool>();
    if (grouped && (layout_of(value_ref(n.args.at(0))).sizes.size() != 4 || k.sizes[1] == 0 || q.sizes[1] % k.sizes[1] != 0)) {
      why = "grouped heads other than 4-D q, k and v whose heads divide q's";
      return false;
    }
    const int64_t d = q.sizes[3];
    for (size_t dim = 0; dim < 2; ++dim)
      if (k.sizes[dim] != v.sizes[dim] || (k.sizes[dim] != q.sizes[dim] && k.sizes[dim] != 1 && !(grouped && dim == 1))) {
        why = "k and v do not broadcast over q's batch and heads";
        return false;
      }
    if (k.sizes[3] != d || v.sizes[3] != d || k.sizes[2] != v.sizes[2]) { why = "q, k and v shapes do not match"; return false; }
    if (d % 8 != 0 || d > kMaxHeadDim) { why = "head dimensions other than multiples of 8 up to 128"; return false; }
    if (q.sizes[0] * q.sizes[1] > 65535) { why = "more than 65535 heads in all"; return false; }
    g.batch = q.sizes[0] * q.sizes[1];
    g.m = q.sizes[2];
    g.n = k.sizes[2];
    g.k = d;
    g.attention.causal = causal.is_boolean() && causal.get<bool>();
    g.attention.scale = is_number(scale) ? number(scale) : 1.0 / std::sqrt((double)d);
    return true;
  }

  bool supports(const Group& g, std::string& why) const override { return operands_float32(g, 3, why); }
  // TF32 products under the tf32 policy only; 3xTF32 (float32's accuracy) under either, and only
  // tiles that fit a block's shared memory.
  bool allowed(const Group& g, const Config& c, const std::string& policy) const override {
    return (c.at("SPLIT") == 3 || policy == "tf32") &&
           attention_smem_bytes((int)c.at("BN"), g.k, (int)c.at("STAGES")) <= kMaxSharedBytes;
  }
  std::string precision(const Group&, const Config& c) const override { return c.at("SPLIT") == 3 ? "3xtf32" : "tf32"; }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    const float scale = (float)(g.attention.scale * 1.4426950408889634);  // base-2 softmax
    unsigned bits;
    std::memcpy(&bits, &scale, sizeof bits);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08xu", bits);
    return "fusetune::attention_kernel<" + p("WARPS") + ", " + p("BN") + ", " + std::to_string(g.k) + ", " + p("STAGES") +
           ", " + p("SPLIT") +
           ", " + (g.attention.causal ? "true" : "false") + ", " + hex + ", " + std::to_string(out_rank(g)) + ", " +
           g.op_type() + ">";
  }
  std::string extension_includes(const Group&, const std::string& template_file) const override {
    return "#include \"" + template_file + "\"\n#include \"attention_launch.h\"\n";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return attention_launch((int)c.at("WARPS"), (int)c.at("BN"), g.k, (int)c.at("STAGES"), g.m, g.batch);
  }
  std::string launch_expr(const Group&, const ParamText& p) const override {
    return "fusetune::attention_launch(" + p("WARPS") + ", " + p("BN") + ", args.k, " + p("STAGES") + ", args.m, args.batch)";
  }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    return shared_memory_opt_in(*this, g, p) + Family::extension_launch(g, p);
  }
  // Both products over the keys each query reads (about half of them under the causal mask).
  double flops(const Group& g) const override {
    const double pairs = g.attention.causal ? (double)g.m * g.n / 2 : (double)g.m * g.n;
    return 4.0 * (double)g.batch * pairs * (double)g.k + (double)g.numel() * (double)(g.ops.size() - 1);
  }
};

}  // namespace

const Family& attention_family() {
  static const Attention f;
  return f;
}

}  // namespace fusetune
