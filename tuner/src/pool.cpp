// Pooling ops: their windows as PyTorch's max_pool*_with_indices and avg_pool* take them, and
// the call of templates/pool.cuh that computes one output element.
#include "pool.h"

namespace fusetune {

namespace {

int spatial_dims(const std::string& op) {
  for (const char* d : {"1d", "2d", "3d"})
    if (op.find(std::string("pool") + d) != std::string::npos) return d[0] - '0';
  return 0;
}

// An int or a list of ints for nd dimensions (a single value repeats); `fallback` when empty.
std::optional<std::vector<int64_t>> ints(const json& v, int nd, const std::vector<int64_t>& fallback) {
  if (v.is_null() || (v.is_array() && v.empty())) return fallback;
  if (is_number(v)) return std::vector<int64_t>(nd, (int64_t)number(v));
  if (!v.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const json& x : v) {
    if (!is_number(x)) return std::nullopt;
    out.push_back((int64_t)number(x));
  }
  if (out.size() == 1) out.resize(nd, out[0]);
  if ((int)out.size() != nd) return std::nullopt;
  return out;
}

std::string braced(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// The last dimension's kernel size where pool.cuh may read a window's rows in aligned float2
// pairs, else 0: the last dimension is contiguous with an even stride (so a window's first column
// has the padding's parity), undilated, and every other stride that moves is even (so each row's
// first column has that parity too; pool.cuh checks the pointer's alignment).
int64_t paired_width(const PoolOp& p, const std::vector<int64_t>& in_stride, const Layout& lead) {
  const size_t last = p.in.size() - 1;
  if (in_stride[last] != 1 || p.stride[last] % 2 != 0 || p.kernel[last] < 2 || p.dilation[last] != 1) return 0;
  for (size_t d = 0; d < last; ++d)
    if (p.in[d] > 1 && in_stride[d] % 2 != 0) return 0;
  for (size_t d = 0; d < lead.sizes.size(); ++d)
    if (lead.sizes[d] > 1 && lead.strides[d] % 2 != 0) return 0;
  return p.kernel[last];
}

}  // namespace

bool is_pool_op(const std::string& op) {
  return op == "aten.max_pool2d_with_indices.default" || op == "aten.max_pool3d_with_indices.default" ||
         op == "aten.avg_pool1d.default" || op == "aten.avg_pool2d.default" || op == "aten.avg_pool3d.default";
}

bool pool_returns_indices(const std::string& op) { return op.find("_with_indices") != std::string::npos; }

std::optional<PoolOp> pool_of(const Node& n, const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
                              std::string& why) {
  const int nd = spatial_dims(n.op);
  const bool max = pool_returns_indices(n.op);
  PoolOp p;
  p.lead = (int)in_shape.size() - nd;
  if (nd == 0 || p.lead < 0 || in_shape.size() != out_shape.size()) { why = "unexpected shapes"; return std::nullopt; }
  const auto kernel = ints(node_arg(n, 1, "kernel_size"), nd, {});
  if (!kernel || kernel->empty()) { why = "the kernel size must be constant"; return std::nullopt; }
  const auto stride = ints(node_arg(n, 2, "stride"), nd, *kernel);
  const auto padding = ints(node_arg(n, 3, "padding"), nd, std::vector<int64_t>(nd, 0));
  const auto dilation = max ? ints(node_arg(n, 4, "dilation"), nd, std::vector<int64_t>(nd, 1)) : std::vector<int64_t>(nd, 1);
  if (!stride || !padding || !dilation) { why = "stride, padding and dilation must be constants"; return std::nullopt; }
  if (!max) {
    const json& include_pad = node_arg(n, 5, "count_include_pad");
    p.kind = include_pad.is_boolean() && !include_pad.get<bool>() ? 2 : 1;
    const json& divisor = n.op == "aten.avg_pool1d.default" ? json() : node_arg(n, 6, "divisor_override");
    if (!divisor.is_null()) {
      if (!is_number(divisor) || number(divisor) == 0) { why = "divisor_override must be a nonzero constant"; return std::nullopt; }
      p.divisor = (int64_t)number(divisor);
    }
  }
  p.kernel = *kernel;
  p.stride = *stride;
  p.padding = *padding;
  p.dilation = *dilation;
  p.in.assign(in_shape.begin() + p.lead, in_shape.end());
  p.out.assign(out_shape.begin() + p.lead, out_shape.end());
  return p;
}

std::string pool_expr(const PoolOp& p, int slot, const Layout& input) {
  const size_t nd = p.in.size();
  int64_t spatial = 1;
  for (int64_t o : p.out) spatial *= o;
  const bool narrow = spatial <= 0xffffffffLL;
  const std::string type = narrow ? "unsigned" : "unsigned long long", u = narrow ? "u" : "ull";
  // The output index splits into the batch and channel index (over the input's leading
  // dimensions, at their own strides) and the index within the spatial dimensions.
  const Layout lead{input.base, std::vector<int64_t>(input.sizes.begin(), input.sizes.begin() + p.lead),
                    std::vector<int64_t>(input.strides.begin(), input.strides.begin() + p.lead), 0};
  const bool narrow_all = spatial * lead.numel() <= 0xffffffffLL;
  const std::string outer = narrow_all ? "((unsigned)idx / " + std::to_string(spatial) + "u)"
                                       : "((unsigned long long)idx / " + std::to_string(spatial) + "ull)";
  const std::vector<int64_t> in_stride(input.strides.begin() + p.lead, input.strides.end());
  int64_t taps = 1;
  for (int64_t k : p.kernel) taps *= k;
  return "fusetune::pool<" + std::to_string(p.kind) + ", " + std::to_string(nd) + ", " + std::to_string(taps) + ", " +
         std::to_string(paired_width(p, in_stride, lead)) + ">(a.ptr[" +
         std::to_string(slot) + "] + " + offset_expr(lead, outer) + ", (" + type + ")idx % " + std::to_string(spatial) + u +
         ", fusetune::PoolWindow<" + std::to_string(nd) + ">{" + braced(p.out) + ", " + braced(p.in) + ", " + braced(in_stride) +
         ", " + braced(p.kernel) + ", " + braced(p.stride) + ", " + braced(p.padding) + ", " + braced(p.dilation) + ", " +
         std::to_string(p.divisor) + "})";
}

}  // namespace fusetune
