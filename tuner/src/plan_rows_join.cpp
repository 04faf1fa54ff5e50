// Row groups while the planner walks the graph: a reduction with the chain before it fused into
// its loads and the chain after it fused after it, at the reduced shape (Reduced) or again over
// every input element (Full, e.g. softmax's division); scans along a dimension. The domain is
// the reduced (or scanned) input's shape.
#include <algorithm>
#include <optional>

#include "error.h"
#include "planner.h"

namespace fusetune {

bool is_reduction_op(const std::string& op) {
  return op == "aten.sum.dim_IntList" || op == "aten.sum.default" || op == "aten.mean.dim" ||
         op == "aten.mean.default" || op == "aten.amax.default" || op == "aten.amin.default" ||
         op == "aten.prod.dim_int" || op == "aten.prod.default" || is_arg_reduction(op);
}

bool is_arg_reduction(const std::string& op) { return op == "aten.argmax.default" || op == "aten.argmin.default"; }

bool is_scan_op(const std::string& op) { return op == "aten.cumsum.default" || op == "aten.cumprod.default"; }

namespace {

struct Reduction {
  StatKind kind;
  bool mean;
  std::vector<bool> reduced;  // over the input's dimensions
};

// What reduction node n performs over an input of the given rank; empty with `why` if unsupported.
std::optional<Reduction> reduction_of(const Node& n, int64_t rank, std::string& why) {
  const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
  if (!dtype.is_null() && dtype.value("dtype", "") != "float32") { why = "only float32 results"; return std::nullopt; }
  const bool everything = n.op == "aten.sum.default" || n.op == "aten.mean.default" || n.op == "aten.prod.default";
  json dims = everything ? json() : node_arg(n, 1, "dim");
  if (is_number(dims)) dims = json::array({dims});  // prod.dim_int takes one dimension
  const StatKind kind = n.op == "aten.amax.default"     ? StatKind::Max
                        : n.op == "aten.amin.default"   ? StatKind::Min
                        : n.op == "aten.argmax.default" ? StatKind::ArgMax
                        : n.op == "aten.argmin.default" ? StatKind::ArgMin
                        : n.op.rfind("aten.prod.", 0) == 0 ? StatKind::Prod : StatKind::Sum;
  Reduction r{kind,
              n.op.rfind("aten.mean.", 0) == 0, std::vector<bool>(rank, dims.is_null() || (dims.is_array() && dims.empty()))};
  for (const json& d : dims.is_array() ? dims : json::array()) {
    if (!is_number(d)) { why = "dimensions must be constants"; return std::nullopt; }
    const int64_t dim = (int64_t)number(d) < 0 ? (int64_t)number(d) + rank : (int64_t)number(d);
    if (dim < 0 || dim >= rank) { why = "dimension out of range"; return std::nullopt; }
    r.reduced[dim] = true;
  }
  return r;
}

}  // namespace

std::optional<std::vector<bool>> row_dims(const Node& n, int64_t rank) {
  if (is_scan_op(n.op)) {
    const json& dim = node_arg(n, 1, "dim");
    int64_t d = is_number(dim) ? (int64_t)number(dim) : rank;
    if (d < 0) d += rank;
    if (d < 0 || d >= rank) return std::nullopt;
    std::vector<bool> reduced(rank, false);
    reduced[d] = true;
    return reduced;
  }
  std::string why;
  if (!is_reduction_op(n.op)) return std::nullopt;
  const auto red = reduction_of(n, rank, why);
  if (!red) return std::nullopt;
  return red->reduced;
}

bool along_cat(const std::vector<bool>& reduced, int64_t dim, const std::vector<int64_t>& shape) {
  if (!reduced[dim] || shape[dim] == 1) return false;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d] && (int64_t)d != dim && shape[d] != 1) return false;
  return true;
}

bool Planner::cat_waits(const std::string& v, int64_t dim) const {
  const std::vector<int64_t>& shape = g_.value(v).shape;
  const std::vector<const Node*>& readers = readers_of(v);
  if (readers.empty()) return false;
  const Node& m = *readers.front();
  if (m.args.empty() || !is_value_ref(m.args.at(0)) || value_ref(m.args.at(0)) != v) return false;
  if (m.op == "aten.slice.Tensor") return cat_waits(m.name, dim);
  const auto reduced = row_dims(m, (int64_t)shape.size());
  return reduced && along_cat(*reduced, dim, shape);
}

// Whether `shape` is the shape of a row of group gi, with or without the reduced dimensions kept.
bool Planner::is_row_shape(int gi, const std::vector<int64_t>& shape) const {
  // One value per row, in row order: the kept sizes, with or without size-1 dimensions (a
  // BatchNorm's per-channel statistic of (1, C, 1, 1) viewed as (C)).
  return without_unit_dims(shape) == without_unit_dims(groups_[gi].row.kept());
}

namespace {

// Whether a value of shape `from` broadcast to `to` gives each element of `to` the element at the
// same row-major position: the same elements in the same order, perhaps viewed with other size-1
// dimensions.
bool same_order(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  auto l = broadcast_to(Layout::contiguous("", from), to);
  return l && Layout{"", l->sizes, l->strides, 0}.is_contiguous() && l->numel() == numel_of(from);
}

}  // namespace

// Whether a fused value of group gi, broadcast to the domain, holds the right element for
// every domain element: a Full value must have the domain's own order, a Reduced one must
// vary along the kept dimensions only, in row order.
bool Planner::fits_domain(int gi, const Fused& f) const {
  const RowInfo& r = groups_[gi].row;
  if (f.level == Level::Full) return same_order(f.shape, r.domain);
  auto l = broadcast_to(Layout::contiguous("", f.shape), r.domain);
  if (!l) return false;
  std::vector<int64_t> kept_sizes, kept_strides;
  for (size_t d = 0; d < r.domain.size(); ++d) {
    if (r.reduced[d] && r.domain[d] != 1 && l->strides[d] != 0) return false;
    if (!r.reduced[d]) { kept_sizes.push_back(l->sizes[d]); kept_strides.push_back(l->strides[d]); }
  }
  return Layout{"", kept_sizes, kept_strides, 0}.is_contiguous();
}

// Joins elementwise node n to row group gi when its result is per domain element or per row;
// false when it cannot (the caller then starts a new group). A result per domain element may
// have another shape (a GroupNorm's groups viewed back to channels): every operand of the group
// then holds its elements in that shape's order, and the loaded ones view the domain that way.
bool Planner::join_row(int gi, const Node& n, const ValueInfo& out, const std::vector<std::pair<size_t, std::string>>& operands) {
  bool any_full = false;
  int phase = 0;
  for (const auto& [pos, v] : operands) {
    auto it = fused_.find(v);
    if (it == fused_.end() || it->second.group != gi) continue;
    any_full |= it->second.level == Level::Full;
    phase = std::max(phase, it->second.phase);
  }
  const RowInfo& r = groups_[gi].row;
  const bool reshaped = out.shape != r.domain && any_full && numel_of(out.shape) == numel_of(r.domain);
  Level level;
  if (!any_full && is_row_shape(gi, out.shape)) level = Level::Reduced;
  else if (out.shape == r.domain || reshaped) level = Level::Full;
  else return false;
  if (!has_room(gi, new_loads(gi, operands))) return false;
  for (const auto& [pos, v] : operands) {
    auto it = fused_.find(v);
    if (it == fused_.end() || it->second.group != gi) {
      if (!reshaped) continue;
      // Loaded: its view over the result must be one over the domain too.
      const Layout l = memory_.count(v) ? memory_.at(v) : Layout::contiguous(v, fused_.at(v).shape);
      auto aligned = broadcast_to(l, out.shape);
      if (aligned && !reshape(*aligned, r.domain)) return false;
      continue;
    }
    const Fused& f = it->second;
    const bool fits = reshaped ? f.level == Level::Full && same_order(f.shape, out.shape)
                      : level == Level::Full ? fits_domain(gi, f) : is_row_shape(gi, f.shape);
    if (!fits) return false;
  }
  Step step{&n, level == Level::Full ? next_var() : next_row_var(gi), false, {}, {}};
  step.level = level;
  step.phase = phase;
  resolve_operands(n, gi, out.shape, operands, level == Level::Reduced ? &r : nullptr, step);
  fused_[n.name] = Fused{gi, step.var, out.shape, level, phase};
  add_step(gi, n.name, n.op, std::move(step));
  return true;
}

// The row group that reduction n (of fused value v over `reduced`) can join: v's own group when
// it is a row group over the same rows, or an elementwise group over v's shape that becomes
// one (its chain is then fused into the reduction's loads); -1 for none.
int Planner::row_group_for(const Fused& f, const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  Building& b = groups_[f.group];
  if (f.phase >= kScanPhase) return -1;  // a scanned value exists in the final pass only
  if (!has_room(f.group, 0)) return -1;    // no slot left for the result
  if (is_row_group(f.group))
    return b.row.domain == shape && b.row.reduced == reduced && f.level == Level::Full && fits_domain(f.group, f) ? f.group : -1;
  if (b.group.family != "elementwise" || b.reads_index || b.group.index_shape != shape || f.shape != shape) return -1;
  for (const std::string& node : b.group.nodes)
    if (!g_.values.count(node) || g_.value(node).shape != shape) return -1;
  for (const Step& s : b.steps)
    if (s.pool || !s.node || s.gather_extent > 0 || !s.cat.empty() || !s.pad_inside.empty() || s.int64)
      return -1;  // read by window, copied, gathered, concatenated or padded, or int64: not a float of the row
  for (const auto& [v, dtype] : b.typed_values)
    if (!is_half(dtype) && dtype != "bool") return -1;  // row kernels load float32, half and bool memory only
  b.group.family = "reduce";
  b.row.domain = shape;
  b.row.reduced = reduced;
  return f.group;
}

// The row group that row op n over value v (rows along `reduced`) joins: v's own group when it
// can take it, else the last group if it is a row group over the same rows of memory, else a
// new one. Records how the step reads v.
int Planner::rows_over(const Node& n, const std::string& v, const std::vector<bool>& reduced, Step& step) {
  const std::vector<int64_t>& shape = g_.value(v).shape;
  if (cats_.count(v)) {
    const int gi = rows_over_cat(v, reduced);
    if (gi >= 0) {
      step.fused_operands[v] = fused_.at(v).var;
      return gi;
    }
    realize_cat(v);
  }
  if (auto it = fused_.find(v); it != fused_.end()) {
    const int gi = row_group_for(it->second, shape, reduced);
    if (gi >= 0) {
      step.fused_operands[v] = it->second.var;
      return gi;
    }
    materialize(v);
  }
  // Row kernels load float32, half and bool memory (converting), no int64.
  const bool bytes = memory_.count(v) && memory_dtype(memory_.at(v).base) == "bool";
  const Layout& l = operand(v, n, /*int64_ok=*/bytes, /*half_ok=*/true);
  step.loaded_operands[v] = l;
  return row_group_after(producer_.at(l.base), shape, reduced);
}

int Planner::row_group_after(int after, const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  const int last = (int)groups_.size() - 1;
  if (last > after && is_row_group(last) && groups_[last].row.domain == shape && groups_[last].row.reduced == reduced &&
      has_room(last, 1))
    return last;
  std::vector<int64_t> rows;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) rows.push_back(shape[d]);
  const int gi = new_group("reduce", rows);
  groups_[gi].row.domain = shape;
  groups_[gi].row.reduced = reduced;
  return gi;
}

int Planner::rows_over_cat(const std::string& v, const std::vector<bool>& reduced) {
  PendingCat& c = cats_.at(v);
  if (!along_cat(reduced, c.dim, c.shape) || !cat_fill(c.step)) return -1;
  const int gi = row_group_after(c.latest_producer, c.shape, reduced);
  Step step = std::move(c.step);
  step.level = Level::Full;
  step.phase = 0;
  fused_[v] = Fused{gi, step.var, c.shape, Level::Full, 0};
  cats_.erase(v);
  add_step(gi, v, step.node->op, std::move(step));
  return gi;
}

// cumsum / cumprod along one dimension: a row group whose rows run along it, the scanned value
// known per element in the final pass only (so no reduction of the same group can read it).
void Planner::add_scan(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
  if (!dtype.is_null() && dtype.value("dtype", "") != "float32") unsupported(n, "only float32 results");
  if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
    unsupported(n, "the input must be a computed tensor");
  const std::string v = value_ref(n.args.at(0));
  const std::vector<int64_t>& shape = g_.value(v).shape;
  const int64_t rank = (int64_t)shape.size();
  if (rank == 0) unsupported(n, "a scan of a scalar is not lowered");
  const auto reduced = row_dims(n, rank);
  if (!reduced) unsupported(n, "dimension out of range");
  Step step{&n, next_var(), false, {}, {}};
  const int gi = rows_over(n, v, *reduced, step);
  RowInfo& row = groups_[gi].row;
  if (row.stats.empty() && row.scans.empty()) {  // a converted elementwise group: one index per row
    groups_[gi].group.index_shape.clear();
    for (int64_t i = 0; i < rank; ++i)
      if (!(*reduced)[i]) groups_[gi].group.index_shape.push_back(shape[i]);
  }
  step.level = Level::Full;
  step.phase = kScanPhase;
  step.scan = (int)row.scans.size();
  row.scans.push_back(n.op == "aten.cumprod.default" ? ScanKind::Prod : ScanKind::Sum);
  fused_[n.name] = Fused{gi, step.var, out.shape, Level::Full, kScanPhase};
  add_step(gi, n.name, n.op, std::move(step));
}

void Planner::add_reduction(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
    unsupported(n, "the input must be a computed tensor");
  const std::string v = value_ref(n.args.at(0));
  const std::vector<int64_t>& shape = g_.value(v).shape;
  std::string why;
  const auto red = reduction_of(n, (int64_t)shape.size(), why);
  if (!red) unsupported(n, why);
  bool over_ones = !is_arg_reduction(n.op);
  for (size_t d = 0; d < shape.size(); ++d) over_ones &= !red->reduced[d] || shape[d] == 1;
  if (over_ones) {  // each result is its one input element: the input reshaped, no kernel
    synthetic_.push_back(Node{n.name, "aten.reshape.default", json::array({n.args.at(0), out.shape}), json::object(), n.source});
    return visit(synthetic_.back());
  }
  Step step{&n, "", false, {}, {}};
  const int gi = rows_over(n, v, red->reduced, step);
  if (groups_[gi].row.stats.empty()) groups_[gi].group.index_shape = out.shape;
  RowInfo& row = groups_[gi].row;
  const auto it = fused_.find(v);
  RowStat stat;
  stat.kind = red->kind;
  stat.pass = it != fused_.end() && it->second.group == gi ? it->second.phase : 0;
  stat.mean = red->mean;
  if (stat.kind == StatKind::Sum && !stat.mean) online_exp_sum(gi, v, stat);
  if (stat.kind == StatKind::ArgMax || stat.kind == StatKind::ArgMin) {
    // The index is a float in the kernel: exact below 2^24.
    if (numel_of(shape) / std::max<int64_t>(numel_of(out.shape), 1) > (1 << 24))
      unsupported(n, "rows of more than 2^24 elements");
    RowStat extreme = stat;  // the maximum (minimum) itself, folded in the same pass
    extreme.kind = stat.kind == StatKind::ArgMax ? StatKind::Max : StatKind::Min;
    stat.partner = (int)row.stats.size();
    row.stats.push_back(extreme);
  }
  step.var = next_row_var(gi);
  step.level = Level::Reduced;
  step.phase = stat.pass + 1;
  step.stat = (int)row.stats.size();
  row.stats.push_back(stat);
  row.passes = std::max(row.passes, stat.pass + 1);
  fused_[n.name] = Fused{gi, step.var, out.shape, Level::Reduced, step.phase};
  add_step(gi, n.name, n.op, std::move(step));
}

// sum(exp(a - s)) where an earlier statistic is amax(a) over the same rows and s is known when
// that maximum is (softmax's and logsumexp's s is the maximum itself): the sum is accumulated in
// the maximum's pass with the online rescaling, saving a pass over the data.
void Planner::online_exp_sum(int gi, const std::string& v, RowStat& stat) {
  const Step* e = fused_step(gi, v);
  if (!e || !e->node || e->node->op != "aten.exp.default" || !is_value_ref(e->node->args.at(0))) return;
  const Step* t = fused_step(gi, value_ref(e->node->args.at(0)));
  if (!t || !t->node || t->node->op != "aten.sub.Tensor" || !node_arg(*t->node, 2, "alpha").is_null()) return;
  const json& a = t->node->args.at(0);
  const json& s = t->node->args.at(1);
  if (!is_value_ref(a) || !is_value_ref(s)) return;
  const auto shift = fused_.find(value_ref(s));
  if (shift == fused_.end() || shift->second.group != gi || shift->second.level != Level::Reduced) return;
  const RowInfo& row = groups_[gi].row;
  for (const Step& st : groups_[gi].steps) {
    if (st.stat < 0 || row.stats[st.stat].kind != StatKind::Max || value_ref(st.node->args.at(0)) != value_ref(a)) continue;
    if (shift->second.phase > row.stats[st.stat].pass + 1) continue;
    stat.kind = StatKind::ExpSum;
    stat.pass = row.stats[st.stat].pass;
    stat.partner = st.stat;
    stat.shift = shift->second.var;
    return;
  }
}

// The step computing fused value v in group gi, if any.
const Step* Planner::fused_step(int gi, const std::string& v) const {
  const auto it = fused_.find(v);
  if (it == fused_.end() || it->second.group != gi) return nullptr;
  for (const Step& s : groups_[gi].steps)
    if (s.var == it->second.var) return &s;
  return nullptr;
}

}  // namespace fusetune
