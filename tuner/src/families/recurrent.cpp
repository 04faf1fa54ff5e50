// The recurrent family: a multi-layer LSTM (fusetune::lstm, which capture makes of nn.LSTM in
// the forms it runs: tuner/py/fusetune_py/recurrent.py) as one persistent kernel
// (templates/recurrent.cuh), the layers run as a wavefront over the time steps. Slots: x [T, B,
// I], h0 and c0 [L, B, H], the packed weights, then the output (the last layer's h_t, h_n, c_n).
// The kernel writes its output as it is: no elementwise op joins its group.
#include "families.h"
#include "graph.h"
#include "recurrent_launch.h"

namespace fusetune {

namespace {

constexpr const char* kLstm = "fusetune.lstm.default";
constexpr int kMaxBatch = 16;  // capture's MAX_BATCH: the kernel keeps 4 x B sums per warp in registers
constexpr int64_t kMaxSharedBytes = 227 * 1024;

// T, B, I, H, L of a group (m, batch, k, n, and h0's first size).
struct LstmSizes {
  int T, B, I, H, L;
};
LstmSizes sizes_of(const Group& g) {
  return {(int)g.m, (int)g.batch, (int)g.k, (int)g.n, (int)g.slots.at(1).layout.sizes.at(0)};
}

class Recurrent : public Family {
 public:
  std::string name() const override { return "recurrent"; }
  bool reads_slot_dims() const override { return true; }
  bool anchors(const std::string& op) const override { return op == kLstm; }
  bool takes_epilogue() const override { return false; }

  bool plan_anchor(const Node& n, const std::vector<int64_t>& out_shape, const LayoutOf& layout_of, Group& g,
                   std::vector<Layout>& operands, std::map<std::string, Layout>&, std::string& why) const override {
    for (size_t i = 0; i < 4; ++i)
      if (!is_value_ref(n.args.at(i))) { why = "x, h0, c0 and the weights must be tensors"; return false; }
    const json& layers = n.args.at(4);
    for (size_t i = 0; i < 4; ++i) operands.push_back(layout_of(value_ref(n.args.at(i))));
    const Layout &x = operands[0], &h0 = operands[1], &c0 = operands[2];
    if (x.sizes.size() != 3 || h0.sizes.size() != 3 || c0.sizes != h0.sizes || !is_number(layers)) {
      why = "x must be [T, B, I], h0 and c0 [L, B, H]";
      return false;
    }
    const int64_t T = x.sizes[0], B = x.sizes[1], I = x.sizes[2], L = h0.sizes[0], H = h0.sizes[2];
    if (h0.sizes[1] != B || (int64_t)number(layers) != L || B > kMaxBatch || T < 1 || B < 1) {
      why = "an LSTM of other sizes than x [T, B <= 16, I] and h0, c0 [layers, B, H]";
      return false;
    }
    if (operands[3].sizes != std::vector<int64_t>{lstm_layer_offset((int)L, (int)I, (int)H)}) {
      why = "weights packed other than as fusetune::lstm packs them";
      return false;
    }
    if (out_shape.size() != 1 || out_shape[0] != T * B * H + 2 * L * B * H) {
      why = "an output other than [T * B * H + 2 * layers * B * H]";
      return false;
    }
    g.m = T;
    g.batch = B;
    g.k = I;
    g.n = H;
    return true;
  }

  bool supports(const Group& g, std::string& why) const override { return operands_float32(g, 4, why); }
  // Configs whose blocks' rows fit shared memory.
  bool allowed(const Group& g, const Config& c, const std::string&) const override {
    const LstmSizes s = sizes_of(g);
    return lstm_smem_bytes((int)c.at("U"), s.B, s.I, s.H) <= kMaxSharedBytes;
  }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    const LstmSizes s = sizes_of(g);
    return "fusetune::lstm_kernel<" + p("U") + ", " + std::to_string(s.T) + ", " + std::to_string(s.B) + ", " +
           std::to_string(s.I) + ", " + std::to_string(s.H) + ", " + std::to_string(s.L) + ">";
  }
  std::string extension_includes(const Group&, const std::string& template_file) const override {
    return "#include \"" + template_file + "\"\n#include \"recurrent_launch.h\"\n";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    const LstmSizes s = sizes_of(g);
    return lstm_launch((int)c.at("U"), s.B, s.I, s.H, s.L);
  }
  std::string launch_expr(const Group& g, const ParamText& p) const override {
    const LstmSizes s = sizes_of(g);
    return "fusetune::lstm_launch(" + p("U") + ", " + std::to_string(s.B) + ", " + std::to_string(s.I) + ", " +
           std::to_string(s.H) + ", " + std::to_string(s.L) + ")";
  }
  // All blocks resident at once: the kernel's grid barrier waits for every one of them.
  json launch_extras(const Group&, const Config&) const override { return {{"cooperative", true}}; }
  std::string extension_launch(const Group& g, const ParamText& p) const override {
    return shared_memory_opt_in(*this, g, p) + "  const fusetune::LaunchDims d = " + launch_expr(g, p) +
           ";\n  void* params[] = {const_cast<fusetune::KernelArgs*>(&args)};\n"
           "  // A launch error is the binding's to report (C10_CUDA_KERNEL_LAUNCH_CHECK reads it back).\n"
           "  (void)cudaLaunchCooperativeKernel((const void*)&" + kernel_instance(g, p) +
           ", dim3(d.grid[0], d.grid[1], d.grid[2]), dim3(d.block[0], d.block[1], d.block[2]), params, d.shared_bytes, "
           "stream);\n";
  }
  int64_t workspace_bytes(const Group& g) const override {
    const LstmSizes s = sizes_of(g);
    return lstm_workspace_bytes(s.B, s.H, s.L);
  }
  // The gates' products of every step and layer (the gate arithmetic is not counted).
  double flops(const Group& g) const override {
    const LstmSizes s = sizes_of(g);
    const double rows = 2.0 * s.T * s.B * 4.0 * s.H;
    return rows * (s.I + s.H) + rows * (s.L - 1) * 2.0 * s.H;
  }
};

}  // namespace

const Family& recurrent_family() {
  static const Recurrent f;
  return f;
}

}  // namespace fusetune
