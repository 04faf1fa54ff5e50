// The cuDNN families: a convolution (torch's aten.convolution: 1-D to 3-D, transposed, grouped,
// strided, padded, dilated) through cuDNN's graph API, each engine configuration its heuristics
// offer (every mode, fallback included) being one candidate. The bias and the rest of the chain
// are one generated elementwise pass after it (templates/gemm_epilogue.cuh), none when the group
// is the bare convolution. cudnn_tf32 holds the tensor-core engines (TF32 on fp32 data, the tf32
// policy only), cudnn_fp32 the others. The extension bakes the winning engine and its knobs
// (templates/cudnn_conv.h).
//
// LAYOUT 1 runs the convolution channels-last: x and the weight are transposed first, and the
// pass (then always there, the bare convolution's too) reads the channels-last product and writes
// the channels-first outputs (templates/conv_epilogue.cuh); the transposes are part of the time.
#include "cudnn_conv.h"
#include "families.h"
#include "product_pass.h"

namespace fusetune {

namespace {

const char* const kConvolution = "aten.convolution.default";

bool int_list(const json& j, size_t n, std::vector<int64_t>& out) {
  if (!j.is_array()) return false;
  out.clear();
  for (const json& v : j) {
    if (!v.is_number_integer()) return false;
    out.push_back(v.get<int64_t>());
  }
  if (out.size() == 1 && n > 1) out.assign(n, out[0]);  // torch expands a single value
  return out.size() == n;
}

// Whether the group is the bare convolution (no bias, no chain): it then writes its output itself.
bool alone(const Group& g) { return g.ops.size() == 1 && g.outputs.size() == 1 && g.slots.size() == 3; }

// Code lines indented two more spaces.
std::string indent(const std::string& code) {
  std::string out;
  size_t start = 0;
  while (start < code.size()) {
    const size_t end = code.find('\n', start);
    out += "  " + code.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

bool channels_last(const Config& c) { return c.at("LAYOUT") == 1; }

// The group's output as [n, c, s] (its channels-last product has the same).
ConvDims output_dims(const Group& g) {
  return conv_dims(std::vector<long long>(g.index_shape.begin(), g.index_shape.end()));
}

std::string int_array(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < 3; ++i) s += (i ? ", " : "") + std::to_string(i < v.size() ? v[i] : (int64_t)0);
  return s + "}";
}

class CudnnFamily : public Family {
 public:
  explicit CudnnFamily(bool tf32) : tf32_(tf32) {}
  std::string name() const override { return tf32_ ? "cudnn_tf32" : "cudnn_fp32"; }
  std::string group_family() const override { return "conv"; }
  bool reads_slot_dims() const override { return true; }
  bool anchors(const std::string& op) const override { return op == kConvolution; }

  bool plan_anchor(const Node& n, const std::vector<int64_t>& out_shape, const LayoutOf& layout_of, Group& g,
                   std::vector<Layout>& operands, std::map<std::string, Layout>& loaded, std::string& why) const override {
    operands.assign(2, Layout{});
    Layout &a = operands[0], &b = operands[1];
    const json &jx = n.args.at(0), &jw = n.args.at(1), &jbias = node_arg(n, 2, "bias");
    if (!is_value_ref(jx) || !is_value_ref(jw)) { why = "the input and the weight must be tensors"; return false; }
    a = layout_of(value_ref(jx));
    b = layout_of(value_ref(jw));
    const size_t rank = a.sizes.size(), spatial = rank - 2;
    if (rank < 3 || rank > 5 || b.sizes.size() != rank || out_shape.size() != rank) {
      why = "convolutions of 1 to 3 spatial dimensions over a batch (unbatched inputs are not supported)";
      return false;
    }
    ConvParams& c = g.conv;
    const json& transposed = node_arg(n, 6, "transposed");
    const json& groups = node_arg(n, 8, "groups");
    if (!transposed.is_boolean() || !groups.is_number_integer() || !int_list(node_arg(n, 3, "stride"), spatial, c.stride) ||
        !int_list(node_arg(n, 4, "padding"), spatial, c.padding) || !int_list(node_arg(n, 5, "dilation"), spatial, c.dilation) ||
        !int_list(node_arg(n, 7, "output_padding"), spatial, c.output_padding)) {
      why = "stride, padding, dilation and output_padding must be integer lists";
      return false;
    }
    c.transposed = transposed.get<bool>();
    c.groups = groups.get<int64_t>();
    const int64_t in_channels = c.transposed ? b.sizes[0] : b.sizes[1] * c.groups;
    if (c.groups < 1 || a.sizes[1] != in_channels) { why = "the weight does not match the input's channels"; return false; }
    std::vector<int64_t> expect = {a.sizes[0], c.transposed ? b.sizes[1] * c.groups : b.sizes[0]};
    for (size_t d = 0; d < spatial; ++d) {
      const int64_t k = c.dilation[d] * (b.sizes[2 + d] - 1) + 1;
      expect.push_back(c.transposed ? (a.sizes[2 + d] - 1) * c.stride[d] - 2 * c.padding[d] + k + c.output_padding[d]
                                    : (a.sizes[2 + d] + 2 * c.padding[d] - k) / c.stride[d] + 1);
    }
    if (expect != out_shape) { why = "the output's shape is not what the arguments give"; return false; }
    if (is_value_ref(jbias)) {  // one value per output channel, added by the epilogue
      Layout l = layout_of(value_ref(jbias));
      if (l.sizes.size() != 1 || l.sizes[0] != out_shape[1]) { why = "the bias is not one value per output channel"; return false; }
      const int64_t stride = l.strides[0];
      l.sizes = out_shape;
      l.strides.assign(rank, 0);
      l.strides[1] = stride;
      loaded[value_ref(jbias)] = l;
    }
    return true;
  }
  std::string anchor_expr(const Node& n, const ArgExpr& arg) const override {
    return is_value_ref(node_arg(n, 2, "bias")) ? "(x[0] + " + arg(2, "bias") + ")" : "x[0]";
  }

  bool supports(const Group& g, std::string& why) const override {
    if (g.slots.size() + 1 > (size_t)kMaxSlots) {
      why = "no free kernel-argument slot for the product";
      return false;
    }
    return true;
  }
  bool has_kernel(const Group& g, const Config& c) const override { return !alone(g) || channels_last(c); }
  bool measure_first() const override { return true; }
  std::string kernel_header(const std::string&) const override { return "conv_epilogue.cuh"; }
  json library_call(const Group& g, const Config& c) const override {
    return json{{"cudnn",
                 {{"tf32", tf32_}, {"engine", c.at("ENGINE")}, {"layout", c.at("LAYOUT")},
                  {"output_slot", alone(g) && !channels_last(c) ? g.out_slot : -1}}}};
  }

  std::string kernel_instance(const Group& g, const ParamText& p) const override {
    if (p("LAYOUT") != "1") return product_pass_instance(g, false);
    const ConvDims d = output_dims(g);
    return "fusetune::channels_last_epilogue_kernel<" + std::to_string(d.c) + "LL, " + std::to_string(d.s) + "LL, 0, " +
           g.op_type() + ">";
  }
  LaunchDims launch(const Group& g, const Config& c) const override {
    return channels_last(c) ? channels_last_launch(output_dims(g)) : product_pass_launch(g);
  }
  std::string launch_expr(const Group&, const ParamText&) const override { return product_pass_launch_expr(); }

  std::string extension_includes(const Group&, const std::string& template_file) const override {
    return "#define FUSETUNE_CUDNN_LINKED\n#include \"" + template_file + "\"\n#include \"conv_epilogue.cuh\"\n";
  }
  // Both layouts' code, the tuned one taken (the sources do not depend on the tuned constants;
  // tuned_constants.h does).
  std::string extension_launch(const Group& g, const ParamText&) const override {
    const ConvParams& c = g.conv;
    const std::string spec = "fusetune::ConvSpec{" + std::to_string(c.stride.size()) + ", " + (c.transposed ? "true" : "false") +
                             ", " + int_array(c.stride) + ", " + int_array(c.padding) + ", " + int_array(c.dilation) + ", " +
                             int_array(c.output_padding) + "}";
    const std::string product = "args.ptr[" + std::to_string(alone(g) ? g.out_slot : (int)g.slots.size()) + "]";
    const std::string baked = "  static const fusetune::CudnnBaked conv(args, " + spec + ", " + std::to_string(c.groups) +
                              ", tuned::ENGINE_INDEX, tuned::KNOBS, tuned::CUDNN_TUNED_VERSION, tuned::LAYOUT == 1);\n";
    const std::string channels_first = "    float* product = " + product + ";\n    conv.run(args, product, stream);\n" +
                                       (alone(g) ? "" : indent(product_pass_code(g, false)));
    const ConvDims d = output_dims(g);
    const std::string channels_last =
        "    fusetune::KernelArgs epilogue = args;\n"
        "    epilogue.ptr[1] = const_cast<float*>(conv.run_channels_last(args, &fusetune::launch_to_channels_last, stream));\n"
        "    const fusetune::LaunchDims d = fusetune::channels_last_launch(fusetune::ConvDims{" + std::to_string(d.n) + ", " +
        std::to_string(d.c) + ", " + std::to_string(d.s) + "});\n    " + kernel_instance(g, [](const std::string& p) { return p == "LAYOUT" ? "1" : ""; }) +
        "<<<dim3(d.grid[0], d.grid[1], d.grid[2]), dim3(d.block[0], d.block[1], d.block[2]), d.shared_bytes, stream>>>(epilogue);\n";
    return baked + "  if (tuned::LAYOUT == 1) {\n" + channels_last + "  } else {\n" + channels_first + "  }\n";
  }
  // The channels-first product (a channels-last convolution keeps its buffers in CudnnBaked).
  int64_t scratch_floats(const Group& g) const override { return alone(g) ? 0 : g.numel(); }

  // 2 x (multiply-adds of the forward convolution the group is, or is the transpose of).
  double flops(const Group& g) const override {
    const std::vector<int64_t>& w = g.slots[1].layout.sizes;
    double per_output = 1;  // multiply-adds per element of the forward convolution's output
    for (size_t d = 1; d < w.size(); ++d) per_output *= (double)w[d];
    const std::vector<int64_t>& forward_out = g.conv.transposed ? g.slots[0].layout.sizes : g.index_shape;
    double outputs = 1;
    for (int64_t s : forward_out) outputs *= (double)s;
    return 2.0 * outputs * per_output;
  }
  bool allowed(const Group&, const Config&, const std::string& policy) const override { return !tf32_ || policy == "tf32"; }
  std::string precision(const Group&, const Config&) const override { return tf32_ ? "tf32" : "fp32"; }

 private:
  bool tf32_;
};

}  // namespace

const Family& cudnn_tf32_family() {
  static const CudnnFamily f(true);
  return f;
}

const Family& cudnn_fp32_family() {
  static const CudnnFamily f(false);
  return f;
}

}  // namespace fusetune
