// Strided views and the ATen view ops over them.
#include "layout.h"

#include <set>

#include "error.h"

namespace fusetune {

Layout merged_dims(const Layout& l) {
  // Merge dimension pairs (outer, inner) where outer's stride is inner's times inner's size
  // (contiguous runs and runs of broadcast dimensions alike); drop size-1 dimensions.
  Layout m{l.base, {}, {}, l.offset};
  for (size_t d = 0; d < l.sizes.size(); ++d) {
    if (l.sizes[d] == 1) continue;
    if (!m.sizes.empty() && m.strides.back() == l.strides[d] * l.sizes[d]) {
      m.sizes.back() *= l.sizes[d];
      m.strides.back() = l.strides[d];
    } else {
      m.sizes.push_back(l.sizes[d]);
      m.strides.push_back(l.strides[d]);
    }
  }
  return m;
}

namespace {

std::string offset_terms(const Layout& l, const std::string& idx, bool ints) {
  const Layout m = merged_dims(l);
  const std::vector<int64_t>& sizes = m.sizes;
  const std::vector<int64_t>& strides = m.strides;
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const bool narrow = numel <= 0xffffffffLL;
  const std::string i = narrow ? "(unsigned)" + idx : "(unsigned long long)" + idx, u = narrow ? "u" : "ull";
  std::string expr;
  int64_t inner = 1;
  for (int d = (int)sizes.size() - 1; d >= 0; --d) {
    if (strides[d] != 0) {
      std::string term = inner == 1 ? i : "(" + i + " / " + std::to_string(inner) + u + ")";
      if (d > 0) term = "(" + term + " % " + std::to_string(sizes[d]) + u + ")";
      term = (ints ? "(int)" : "(long long)") + term;
      if (strides[d] != 1) term += " * " + std::to_string(strides[d]);
      expr = expr.empty() ? term : term + " + " + expr;
    }
    inner *= sizes[d];
  }
  return expr.empty() ? (ints ? "0" : "0LL") : "(" + expr + ")";
}

}  // namespace

std::string offset_expr(const Layout& l, const std::string& idx) { return offset_terms(l, idx, false); }
std::string int_offset_expr(const Layout& l, const std::string& idx) { return offset_terms(l, idx, true); }

int64_t offset_span(const Layout& l) {
  int64_t span = 0;
  for (size_t d = 0; d < l.sizes.size(); ++d)
    if (l.sizes[d] > 0) span += (l.sizes[d] - 1) * std::llabs(l.strides[d]);
  return span;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (int d = (int)sizes.size() - 2; d >= 0; --d) st[d] = st[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  return st;
}

Layout Layout::contiguous(const std::string& base, const std::vector<int64_t>& sizes) {
  return Layout{base, sizes, contiguous_strides(sizes), 0};
}

int64_t Layout::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool Layout::is_contiguous() const {
  if (offset != 0) return false;
  int64_t expected = 1;
  for (int d = (int)sizes.size() - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

namespace {

const std::set<std::string> kViewOps = {
    "aten.view.default",     "aten._unsafe_view.default", "aten.reshape.default", "aten.permute.default",
    "aten.t.default",        "aten.transpose.int",        "aten.expand.default",  "aten.unsqueeze.default",
    "aten.squeeze.dim",      "aten.squeeze.dims",         "aten.squeeze.default", "aten.slice.Tensor",
    "aten.select.int",       "aten.flip.default",         "aten.unfold.default",  "aten.as_strided.default"};

// PyTorch's computeStride: strides for viewing (sizes, strides) as new_sizes without a copy.
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& sizes,
                                                 const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& new_sizes) {
  std::vector<int64_t> out(new_sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return contiguous_strides(new_sizes);
  int view_d = (int)new_sizes.size() - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = (int)sizes.size() - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

int64_t wrap_dim(int64_t d, size_t rank) { return d < 0 ? d + (int64_t)rank : d; }

}  // namespace

bool is_view_op(const std::string& op) { return kViewOps.count(op) > 0; }

bool is_identity_op(const std::string& op) {
  return op == "aten.clone.default" || op == "aten.alias.default" || op == "aten._to_copy.default" ||
         op == "aten.detach.default" || op == "aten.lift_fresh_copy.default" || op == "aten.contiguous.default";
}

std::optional<Layout> apply_view(const Node& n, const Layout& in, const std::vector<int64_t>& out_shape) {
  Layout r = in;
  const std::string& op = n.op;
  const size_t rank = in.sizes.size();
  if (op == "aten.view.default" || op == "aten._unsafe_view.default" || op == "aten.reshape.default") {
    return reshape(in, out_shape);
  } else if (op == "aten.permute.default") {
    const auto dims = n.args.at(1).get<std::vector<int64_t>>();
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t d = wrap_dim(dims[i], rank);
      r.sizes[i] = in.sizes[d];
      r.strides[i] = in.strides[d];
    }
  } else if (op == "aten.t.default" || op == "aten.transpose.int") {
    int64_t d0 = 0, d1 = 1;
    if (op == "aten.transpose.int") {
      d0 = wrap_dim(n.args.at(1).get<int64_t>(), rank);
      d1 = wrap_dim(n.args.at(2).get<int64_t>(), rank);
    }
    if (rank >= 2) {
      std::swap(r.sizes[d0], r.sizes[d1]);
      std::swap(r.strides[d0], r.strides[d1]);
    }
  } else if (op == "aten.expand.default") {
    auto b = broadcast_to(in, out_shape);
    if (!b) return std::nullopt;
    r = *b;
  } else if (op == "aten.unsqueeze.default" || op == "aten.squeeze.dim" || op == "aten.squeeze.dims" ||
             op == "aten.squeeze.default") {
    // Only size-1 dimensions appear or vanish: drop them all, then insert those of the output.
    std::vector<int64_t> sizes, strides;
    for (size_t d = 0; d < rank; ++d)
      if (in.sizes[d] != 1) { sizes.push_back(in.sizes[d]); strides.push_back(in.strides[d]); }
    r.sizes.clear();
    r.strides.clear();
    size_t k = 0;
    for (int64_t s : out_shape) {
      if (s == 1) { r.sizes.push_back(1); r.strides.push_back(0); continue; }
      if (k >= sizes.size() || sizes[k] != s) return std::nullopt;
      r.sizes.push_back(s);
      r.strides.push_back(strides[k++]);
    }
    if (k != sizes.size()) return std::nullopt;
  } else if (op == "aten.slice.Tensor") {
    const int64_t d = wrap_dim(node_arg(n, 1, "dim").is_null() ? 0 : node_arg(n, 1, "dim").get<int64_t>(), rank);
    const json& start_arg = node_arg(n, 2, "start");
    int64_t start = start_arg.is_null() ? 0 : start_arg.get<int64_t>();
    const json& step_arg = node_arg(n, 4, "step");
    const int64_t step = step_arg.is_null() ? 1 : step_arg.get<int64_t>();
    if (start < 0) start += in.sizes[d];
    start = std::max<int64_t>(0, std::min(start, in.sizes[d]));
    r.offset += start * in.strides[d];
    r.strides[d] *= step;
    r.sizes[d] = out_shape.at(d);
  } else if (op == "aten.select.int") {
    const int64_t d = wrap_dim(n.args.at(1).get<int64_t>(), rank);
    int64_t idx = n.args.at(2).get<int64_t>();
    if (idx < 0) idx += in.sizes[d];
    r.offset += idx * in.strides[d];
    r.sizes.erase(r.sizes.begin() + d);
    r.strides.erase(r.strides.begin() + d);
  } else if (op == "aten.unfold.default") {  // windows of `size` every `step` along d, in a new last dimension
    const int64_t d = wrap_dim(n.args.at(1).get<int64_t>(), rank), size = n.args.at(2).get<int64_t>(),
                  step = n.args.at(3).get<int64_t>();
    if (rank == 0 || size < 1 || step < 1 || size > in.sizes[d]) return std::nullopt;
    r.sizes[d] = (in.sizes[d] - size) / step + 1;
    r.strides[d] = in.strides[d] * step;
    r.sizes.push_back(size);
    r.strides.push_back(in.strides[d]);
  } else if (op == "aten.flip.default") {  // a negative stride from the last element on
    for (int64_t d : node_arg(n, 1, "dims").get<std::vector<int64_t>>()) {
      d = wrap_dim(d, rank);
      r.offset += (in.sizes[d] - 1) * in.strides[d];
      r.strides[d] = -in.strides[d];
    }
  } else if (op == "aten.as_strided.default") {
    // Strides over the input's elements in row-major order, which must be where they lie in
    // memory (and, the planner checks, in PyTorch's storage of the input).
    Layout whole = in;
    whole.offset = 0;
    if (!whole.is_contiguous()) return std::nullopt;
    const json& start_arg = node_arg(n, 3, "storage_offset");
    const int64_t start = start_arg.is_null() ? 0 : start_arg.get<int64_t>();
    r.sizes = node_arg(n, 1, "size").get<std::vector<int64_t>>();
    r.strides = node_arg(n, 2, "stride").get<std::vector<int64_t>>();
    int64_t last = start;
    for (size_t d = 0; d < r.sizes.size(); ++d) {
      if (r.sizes[d] == 0) return std::nullopt;
      if (r.strides[d] < 0) return std::nullopt;
      last += (r.sizes[d] - 1) * r.strides[d];
    }
    if (start < 0 || last >= in.numel()) return std::nullopt;
    r.offset = in.offset + start;
  } else {
    FT_THROW("not a view op: " + op);
  }
  if (r.sizes != out_shape) return std::nullopt;
  return r;
}

std::optional<Layout> reshape(const Layout& in, const std::vector<int64_t>& shape) {
  if (Layout::contiguous("", shape).numel() != in.numel()) return std::nullopt;
  auto strides = view_strides(in.sizes, in.strides, shape);
  if (!strides) return std::nullopt;
  return Layout{in.base, shape, *strides, in.offset};
}

std::optional<Layout> broadcast_to(const Layout& in, const std::vector<int64_t>& shape) {
  if (in.sizes.size() > shape.size()) return std::nullopt;
  Layout r{in.base, shape, std::vector<int64_t>(shape.size(), 0), in.offset};
  const size_t lead = shape.size() - in.sizes.size();
  for (size_t d = 0; d < in.sizes.size(); ++d) {
    const int64_t s = in.sizes[d];
    if (s == shape[lead + d]) r.strides[lead + d] = s == 1 ? 0 : in.strides[d];
    else if (s != 1 && shape[lead + d] != -1) return std::nullopt;
    else if (shape[lead + d] == -1) { r.sizes[lead + d] = s; r.strides[lead + d] = in.strides[d]; }
  }
  return r;
}

}  // namespace fusetune
