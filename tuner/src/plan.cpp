// The planner: walks the graph once in order, joining each elementwise op to the group of its
// fused operands where that keeps one output element per index, and starting a group at each
// anchor (matrix product). Values leave a group (are written to memory) only when something
// outside it needs them.
#include "plan.h"

#include <algorithm>
#include <optional>

#include "error.h"
#include "families.h"
#include "fusetune_args.h"
#include "ops.h"
#include "plan_build.h"

namespace fusetune {

const char* access_name(Access a) {
  switch (a) {
    case Access::Operand: return "operand";
    case Access::Full: return "full";
    case Access::Strided: return "strided";
    case Access::Output: return "output";
  }
  return "?";
}

namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

bool is_reduction_op(const std::string& op) {
  return op == "aten.sum.dim_IntList" || op == "aten.sum.default" || op == "aten.mean.dim" ||
         op == "aten.mean.default" || op == "aten.amax.default" || op == "aten.amin.default";
}

struct Reduction {
  StatKind kind;
  bool mean;
  std::vector<bool> reduced;  // over the input's dimensions
};

// What reduction node n performs over an input of the given rank; empty with `why` if unsupported.
std::optional<Reduction> reduction_of(const Node& n, int64_t rank, std::string& why) {
  const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
  if (!dtype.is_null() && dtype.value("dtype", "") != "float32") { why = "only float32 results"; return std::nullopt; }
  const bool everything = n.op == "aten.sum.default" || n.op == "aten.mean.default";
  const json& dims = everything ? json() : node_arg(n, 1, "dim");
  Reduction r{n.op == "aten.amax.default" ? StatKind::Max : n.op == "aten.amin.default" ? StatKind::Min : StatKind::Sum,
              n.op.rfind("aten.mean.", 0) == 0, std::vector<bool>(rank, dims.is_null() || (dims.is_array() && dims.empty()))};
  for (const json& d : dims.is_array() ? dims : json::array()) {
    if (!is_number(d)) { why = "dimensions must be constants"; return std::nullopt; }
    const int64_t dim = (int64_t)number(d) < 0 ? (int64_t)number(d) + rank : (int64_t)number(d);
    if (dim < 0 || dim >= rank) { why = "dimension out of range"; return std::nullopt; }
    r.reduced[dim] = true;
  }
  return r;
}

// A value computed inside a group and still held in a register there.
struct Fused {
  int group;
  std::string var;
  std::vector<int64_t> shape;
  Level level = Level::Full;  // row groups: per element or per row
  int phase = 0;              // row groups: passes before it is known
};

class Planner {
 public:
  explicit Planner(const Graph& g) : g_(g) {
    for (const auto& [name, v] : g.values) {
      if (v.kind == "input" || v.kind == "parameter" || v.kind == "buffer" || v.kind == "constant") {
        // Contiguous whatever capture saw: the bindings require contiguous inputs and the
        // reference tensors are saved contiguous.
        memory_[name] = Layout::contiguous(name, v.shape);
        producer_[name] = -1;
      }
    }
  }

  Plan run() {
    for (const Node& n : g_.nodes) visit(n);
    Plan plan;
    for (const auto& out : g_.outputs) plan.outputs.push_back(materialize_output(out));
    for (auto& b : groups_) plan.groups.push_back(b.group.family == "reduce" ? finalize_rows(b) : finalize_group(b));
    return plan;
  }

 private:
  [[noreturn]] void unsupported(const Node& n, const std::string& why) {
    FT_USER_ERROR("cannot lower " + n.op + " (" + (n.source.empty() ? n.name : n.source) + "): " + why);
  }

  void check_float(const std::string& value, const Node* n) {
    const ValueInfo& v = g_.value(value);
    if (v.dtype != "float32") {
      const std::string where = n ? " (" + (n->source.empty() ? n->name : n->source) + ")" : "";
      FT_USER_ERROR("value " + value + " has dtype " + v.dtype + where +
                    "; fusetune kernels read and write float32 tensors only");
    }
    if (v.shape.size() > (size_t)kMaxRank)
      FT_USER_ERROR("value " + value + " has rank " + std::to_string(v.shape.size()) + "; at most " +
                    std::to_string(kMaxRank) + " is supported");
  }

  // A value read from memory by node n: only float32 tensors can be read by the kernels.
  const Layout& operand(const std::string& v, const Node& n) {
    const Layout& l = memory_.at(v);
    check_float(l.base, &n);
    return l;
  }

  void visit(const Node& n) {
    const ValueInfo& out = g_.value(n.name);
    if (out.kind == "tuple" && pool_returns_indices(n.op)) {  // lowered where its values are taken
      tuples_[n.name] = &n;
      return;
    }
    if (out.kind == "tuple") unsupported(n, "ops with several outputs are not lowered yet");
    if (n.op == "getitem") return add_getitem(n, out);
    if (n.op == "aten.scalar_tensor.default") return add_constant(n);
    if ((is_identity_op(n.op) || is_view_op(n.op)) && is_value_ref(n.args.at(0)) &&
        constants_.count(value_ref(n.args.at(0)))) {  // a view of a constant is the same constant, broadcast
      constants_[n.name] = constants_.at(value_ref(n.args.at(0)));
      return;
    }
    if (is_identity_op(n.op)) {
      const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
      if (!dtype.is_null() && dtype.value("dtype", "") != "float32") unsupported(n, "only float32 copies are fused");
      forward(n, value_ref(n.args.at(0)), out.shape, /*is_view=*/false);
    } else if (is_view_op(n.op)) {
      forward(n, value_ref(n.args.at(0)), out.shape, /*is_view=*/true);
    } else if (is_elementwise_op(n.op)) {
      add_elementwise(n, out);
    } else if (is_reduction_op(n.op)) {
      add_reduction(n, out);
    } else if (n.op == "aten.cumsum.default" || n.op == "aten.cumprod.default") {
      add_scan(n, out);
    } else if (is_pool_op(n.op)) {
      add_pool(n, n.name, out);
    } else if (const Family* f = family_anchoring(n.op)) {
      add_anchor(n, out, *f);
    } else {
      unsupported(n, "no kernel family lowers this op yet");
    }
  }

  // Identity and view ops produce no code: the result is the same register or a new layout.
  void forward(const Node& n, const std::string& in, const std::vector<int64_t>& shape, bool is_view) {
    if (auto it = fused_.find(in); it != fused_.end()) {
      const Fused& f = it->second;
      auto view = is_view ? apply_view(n, Layout::contiguous("", f.shape), shape) : Layout::contiguous("", shape);
      if (view && view->is_contiguous() && view->numel() == numel_of(f.shape)) {
        Fused view = f;
        view.shape = shape;
        fused_[n.name] = view;
        return;
      }
      materialize(in);  // a transpose (or similar) of a fused value: write it, then view memory
    }
    const Layout& src = memory_.at(in);
    auto view = is_view ? apply_view(n, src, shape) : std::optional<Layout>(src);
    if (!view) view = apply_view(n, copy_to_memory(src, n), shape);
    if (!view) unsupported(n, "view cannot be expressed with strides");
    memory_[n.name] = *view;
    producer_[n.name] = producer_.at(view->base);
  }

  // A float32 constant made in the graph (scalar_tensor): inlined as a literal where it is used.
  void add_constant(const Node& n) {
    const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
    if (!is_number(n.args.at(0)) || (!dtype.is_null() && dtype.value("dtype", "") != "float32"))
      unsupported(n, "only float32 constants are inlined");
    constants_[n.name] = float_literal(number(n.args.at(0)));
  }

  // Tensor operands of n that live in a group or in memory (constants are inlined instead).
  std::vector<std::pair<size_t, std::string>> computed_operands(const Node& n) {
    std::vector<std::pair<size_t, std::string>> out;
    for (const auto& [pos, v] : tensor_operands(n))
      if (!constants_.count(v)) out.emplace_back(pos, v);
    return out;
  }

  void add_elementwise(const Node& n, const ValueInfo& out) {
    check_result(n, out);
    const auto operands = computed_operands(n);
    int target = -1, latest_producer = -1;
    for (const auto& [pos, v] : operands) {
      if (auto it = fused_.find(v); it != fused_.end()) target = std::max(target, it->second.group);
      else latest_producer = std::max(latest_producer, producer_.at(memory_.at(v).base));
    }
    // A kernel never reads memory that it writes itself: operands must come from earlier groups.
    if (target >= 0 && is_row_group(target)) {
      if (target > latest_producer && join_row(target, n, out, operands)) return;
      target = -1;  // a new group, reading the row group's values from memory
    } else if (target < 0) {  // no fused operand: join the latest group over the same elements
      for (int gi = (int)groups_.size() - 1; gi > latest_producer && target < 0; --gi)
        if (!is_row_group(gi) && groups_[gi].group.numel() == numel_of(out.shape)) target = gi;
    }
    const bool join = target >= 0 && target > latest_producer &&
                      numel_of(out.shape) == groups_[target].group.numel();
    if (!join) target = new_group("elementwise", out.shape);
    Step step{&n, next_var(), false, {}, {}};
    for (const auto& [pos, v] : tensor_operands(n))
      if (constants_.count(v)) step.fused_operands[v] = constants_.at(v);
    for (const auto& [pos, v] : operands) {
      auto it = fused_.find(v);
      if (it != fused_.end() && it->second.group == target) {
        step.fused_operands[v] = it->second.var;
        continue;
      }
      if (it != fused_.end()) materialize(v);
      auto aligned = broadcast_to(operand(v, n), out.shape);
      if (!aligned) unsupported(n, "operand " + v + " does not broadcast to the result");
      step.loaded_operands[v] = *aligned;
    }
    fused_[n.name] = Fused{target, step.var, out.shape};
    groups_[target].group.nodes.push_back(n.name);
    groups_[target].group.ops.push_back(n.op);
    groups_[target].steps.push_back(std::move(step));
  }

  void add_anchor(const Node& n, const ValueInfo& out, const Family& family) {
    check_result(n, out);
    for (const auto& [pos, v] : tensor_operands(n)) {
      if (constants_.count(v)) unsupported(n, "a constant tensor as the operand of " + family.name() + " is not supported");
      if (fused_.count(v)) materialize(v);
    }
    const int gi = new_group(family.name(), out.shape);
    Building& b = groups_[gi];
    Step step{&n, next_var(), true, {}, {}};
    auto layout_of = [&](const std::string& v) -> const Layout& { return operand(v, n); };
    std::string why;
    if (!family.plan_anchor(n, out.shape, layout_of, b.group, b.a, b.b, step.loaded_operands, why))
      unsupported(n, why);
    fused_[n.name] = Fused{gi, step.var, out.shape};
    b.group.nodes.push_back(n.name);
    b.group.ops.push_back(n.op);
    b.steps.push_back(std::move(step));
  }

  // ---- Row groups: a reduction with the chain before it fused into its loads and the chain
  // after it fused after it, at the reduced shape (Reduced) or again over every input element
  // (Full, e.g. softmax's division). The domain is the reduced input's shape.

  bool is_row_group(int gi) const { return groups_[gi].group.family == "reduce"; }

  // Whether `shape` is the shape of a row of group gi, with or without the reduced dimensions kept.
  bool is_row_shape(int gi, const std::vector<int64_t>& shape) const {
    const RowInfo& r = groups_[gi].row;
    std::vector<int64_t> kept, keepdim;
    for (size_t d = 0; d < r.domain.size(); ++d) {
      keepdim.push_back(r.reduced[d] ? 1 : r.domain[d]);
      if (!r.reduced[d]) kept.push_back(r.domain[d]);
    }
    return shape == kept || shape == keepdim;
  }

  // Whether a fused value of group gi, broadcast to the domain, holds the right element for
  // every domain element: a Full value must have the domain's own order, a Reduced one must
  // vary along the kept dimensions only, in row order.
  bool fits_domain(int gi, const Fused& f) const {
    const RowInfo& r = groups_[gi].row;
    auto l = broadcast_to(Layout::contiguous("", f.shape), r.domain);
    if (!l) return false;
    if (f.level == Level::Full) return Layout{"", l->sizes, l->strides, 0}.is_contiguous() && l->numel() == numel_of(f.shape);
    std::vector<int64_t> kept_sizes, kept_strides;
    for (size_t d = 0; d < r.domain.size(); ++d) {
      if (r.reduced[d] && r.domain[d] != 1 && l->strides[d] != 0) return false;
      if (!r.reduced[d]) { kept_sizes.push_back(l->sizes[d]); kept_strides.push_back(l->strides[d]); }
    }
    return Layout{"", kept_sizes, kept_strides, 0}.is_contiguous();
  }

  // Joins elementwise node n to row group gi when its result is per domain element or per row;
  // false when it cannot (the caller then starts a new group).
  bool join_row(int gi, const Node& n, const ValueInfo& out, const std::vector<std::pair<size_t, std::string>>& operands) {
    bool any_full = false;
    int phase = 0;
    for (const auto& [pos, v] : operands) {
      auto it = fused_.find(v);
      if (it == fused_.end() || it->second.group != gi) continue;
      any_full |= it->second.level == Level::Full;
      phase = std::max(phase, it->second.phase);
    }
    const RowInfo& r = groups_[gi].row;
    Level level;
    if (!any_full && is_row_shape(gi, out.shape)) level = Level::Reduced;
    else if (out.shape == r.domain) level = Level::Full;
    else return false;
    for (const auto& [pos, v] : operands) {
      auto it = fused_.find(v);
      if (it == fused_.end() || it->second.group != gi) continue;
      const bool fits = level == Level::Full ? fits_domain(gi, it->second) : is_row_shape(gi, it->second.shape);
      if (!fits) return false;
    }
    Step step{&n, level == Level::Full ? next_var() : next_row_var(gi), false, {}, {}};
    step.level = level;
    step.phase = phase;
    for (const auto& [pos, v] : tensor_operands(n))
      if (constants_.count(v)) step.fused_operands[v] = constants_.at(v);
    for (const auto& [pos, v] : operands) {
      auto it = fused_.find(v);
      if (it != fused_.end() && it->second.group == gi) {
        step.fused_operands[v] = it->second.var;
        continue;
      }
      if (it != fused_.end()) materialize(v);
      auto aligned = broadcast_to(operand(v, n), out.shape);
      if (aligned && level == Level::Reduced) aligned = row_to_domain(r, *aligned);
      if (!aligned) unsupported(n, "operand " + v + " does not broadcast to the result");
      step.loaded_operands[v] = *aligned;
    }
    fused_[n.name] = Fused{gi, step.var, out.shape, level, phase};
    add_step(gi, n, std::move(step));
    return true;
  }

  std::string next_row_var(int gi) { return "red[" + std::to_string(groups_[gi].row.n_reduced++) + "]"; }

  void add_step(int gi, const Node& n, Step step) {
    groups_[gi].group.nodes.push_back(n.name);
    groups_[gi].group.ops.push_back(n.op);
    groups_[gi].steps.push_back(std::move(step));
  }

  // The row group that reduction n (of fused value v over `reduced`) can join: v's own group when
  // it is a row group over the same rows, or an elementwise group over v's shape that becomes
  // one (its chain is then fused into the reduction's loads); -1 for none.
  int row_group_for(const Fused& f, const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
    Building& b = groups_[f.group];
    if (f.phase >= kScanPhase) return -1;  // a scanned value exists in the final pass only
    if (is_row_group(f.group))
      return b.row.domain == shape && b.row.reduced == reduced && f.level == Level::Full && fits_domain(f.group, f) ? f.group : -1;
    if (b.group.family != "elementwise" || b.group.index_shape != shape || f.shape != shape) return -1;
    for (const std::string& node : b.group.nodes)
      if (!g_.values.count(node) || g_.value(node).shape != shape) return -1;
    for (const Step& s : b.steps)
      if (s.pool || !s.node) return -1;  // read by window or copied: not an element of the row
    b.group.family = "reduce";
    b.row.domain = shape;
    b.row.reduced = reduced;
    return f.group;
  }

  // The row group that row op n over value v (rows along `reduced`) joins: v's own group when it
  // can take it, else the last group if it is a row group over the same rows of memory, else a
  // new one. Records how the step reads v.
  int rows_over(const Node& n, const std::string& v, const std::vector<bool>& reduced, Step& step) {
    const std::vector<int64_t>& shape = g_.value(v).shape;
    if (auto it = fused_.find(v); it != fused_.end()) {
      const int gi = row_group_for(it->second, shape, reduced);
      if (gi >= 0) {
        step.fused_operands[v] = it->second.var;
        return gi;
      }
      materialize(v);
    }
    const Layout& l = operand(v, n);
    const int last = (int)groups_.size() - 1;
    const bool join_last = last > producer_.at(l.base) && is_row_group(last) && groups_[last].row.domain == shape &&
                           groups_[last].row.reduced == reduced;
    std::vector<int64_t> rows;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) rows.push_back(shape[d]);
    const int gi = join_last ? last : new_group("reduce", rows);
    groups_[gi].row.domain = shape;
    groups_[gi].row.reduced = reduced;
    step.loaded_operands[v] = l;
    return gi;
  }

  // cumsum / cumprod along one dimension: a row group whose rows run along it, the scanned value
  // known per element in the final pass only (so no reduction of the same group can read it).
  void add_scan(const Node& n, const ValueInfo& out) {
    check_result(n, out);
    const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
    if (!dtype.is_null() && dtype.value("dtype", "") != "float32") unsupported(n, "only float32 results");
    if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
      unsupported(n, "the input must be a computed tensor");
    const std::string v = value_ref(n.args.at(0));
    const std::vector<int64_t>& shape = g_.value(v).shape;
    const json& dim = node_arg(n, 1, "dim");
    const int64_t rank = (int64_t)shape.size();
    int64_t d = is_number(dim) ? (int64_t)number(dim) : rank;
    if (d < 0) d += rank;
    if (d < 0 || d >= std::max<int64_t>(rank, 1)) unsupported(n, "dimension out of range");
    if (rank == 0) unsupported(n, "a scan of a scalar is not lowered");
    std::vector<bool> reduced(rank, false);
    reduced[d] = true;
    Step step{&n, next_var(), false, {}, {}};
    const int gi = rows_over(n, v, reduced, step);
    RowInfo& row = groups_[gi].row;
    if (row.stats.empty() && row.scans.empty()) {  // a converted elementwise group: one index per row
      groups_[gi].group.index_shape.clear();
      for (int64_t i = 0; i < rank; ++i)
        if (i != d) groups_[gi].group.index_shape.push_back(shape[i]);
    }
    step.level = Level::Full;
    step.phase = kScanPhase;
    step.scan = (int)row.scans.size();
    row.scans.push_back(n.op == "aten.cumprod.default" ? ScanKind::Prod : ScanKind::Sum);
    fused_[n.name] = Fused{gi, step.var, out.shape, Level::Full, kScanPhase};
    add_step(gi, n, std::move(step));
  }

  void add_reduction(const Node& n, const ValueInfo& out) {
    check_result(n, out);
    if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
      unsupported(n, "the input must be a computed tensor");
    const std::string v = value_ref(n.args.at(0));
    const std::vector<int64_t>& shape = g_.value(v).shape;
    std::string why;
    const auto red = reduction_of(n, (int64_t)shape.size(), why);
    if (!red) unsupported(n, why);
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
    step.var = next_row_var(gi);
    step.level = Level::Reduced;
    step.phase = stat.pass + 1;
    step.stat = (int)row.stats.size();
    row.stats.push_back(stat);
    row.passes = std::max(row.passes, stat.pass + 1);
    fused_[n.name] = Fused{gi, step.var, out.shape, Level::Reduced, step.phase};
    add_step(gi, n, std::move(step));
  }

  // sum(exp(a - s)) where an earlier statistic is amax(a) over the same rows and s is known when
  // that maximum is (softmax's and logsumexp's s is the maximum itself): the sum is accumulated in
  // the maximum's pass with the online rescaling, saving a pass over the data.
  void online_exp_sum(int gi, const std::string& v, RowStat& stat) {
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
  const Step* fused_step(int gi, const std::string& v) const {
    const auto it = fused_.find(v);
    if (it == fused_.end() || it->second.group != gi) return nullptr;
    for (const Step& s : groups_[gi].steps)
      if (s.var == it->second.var) return &s;
    return nullptr;
  }

  // getitem(t, 0) of max pooling (which returns values and indices) is the pooling itself.
  void add_getitem(const Node& n, const ValueInfo& out) {
    const json& t = n.args.at(0);
    const auto it = is_value_ref(t) ? tuples_.find(value_ref(t)) : tuples_.end();
    if (it == tuples_.end()) unsupported(n, "getitem of this op is not lowered");
    if (!(is_number(n.args.at(1)) && number(n.args.at(1)) == 0))
      unsupported(*it->second, "the indices of max pooling are not lowered, only its values");
    add_pool(*it->second, n.name, out);
  }

  // A pooling op (node n, producing `value`) is one value of an elementwise chain that reads its
  // input's window from memory; the chain after it fuses as after any elementwise op.
  void add_pool(const Node& n, const std::string& value, const ValueInfo& out) {
    check_float(value, &n);
    if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
      unsupported(n, "the input must be a computed tensor");
    const std::string v = value_ref(n.args.at(0));
    if (fused_.count(v)) materialize(v);
    const Layout& in = operand(v, n);
    std::string why;
    auto pool = pool_of(n, in.sizes, out.shape, why);
    if (!pool) unsupported(n, why);
    int target = -1;
    for (int gi = (int)groups_.size() - 1; gi > producer_.at(in.base) && target < 0; --gi)
      if (!is_row_group(gi) && groups_[gi].group.family == "elementwise" && groups_[gi].group.numel() == numel_of(out.shape))
        target = gi;
    if (target < 0) target = new_group("elementwise", out.shape);
    Step step{&n, next_var(), false, {}, {{v, in}}};
    step.pool = std::move(*pool);
    fused_[value] = Fused{target, step.var, out.shape};
    groups_[target].group.nodes.push_back(value);
    groups_[target].group.ops.push_back(n.op);
    groups_[target].steps.push_back(std::move(step));
  }

  // A result stays in a register (bool for comparisons) or is a float32 tensor.
  void check_result(const Node& n, const ValueInfo& out) {
    if (out.dtype == "bool" && out.shape.size() <= (size_t)kMaxRank) return;
    check_float(n.name, &n);
  }

  int new_group(const std::string& family, const std::vector<int64_t>& shape) {
    Building b;
    b.group.id = "g" + std::to_string(groups_.size());
    b.group.family = family;
    b.group.index_shape = shape;
    groups_.push_back(std::move(b));
    return (int)groups_.size() - 1;
  }

  std::string next_var() { return "v" + std::to_string(var_count_++); }

  // Makes a fused value an output of its group so that later groups read it from memory.
  void materialize(const std::string& value) {
    if (memory_.count(value)) return;
    const Fused& f = fused_.at(value);
    check_float(value, nullptr);
    groups_[f.group].group.outputs.push_back(GroupOutput{value, f.var, f.shape});
    memory_[value] = Layout::contiguous(value, f.shape);
    producer_[value] = f.group;
    fused_.erase(value);
  }

  // A strided layout that a view cannot reinterpret gets copied by an elementwise group.
  Layout copy_to_memory(const Layout& src, const Node& n) {
    const std::string name = n.name + "_contiguous";
    const int gi = new_group("elementwise", src.sizes);
    Step step{&n, next_var(), false, {}, {{src.base, src}}};
    step.node = nullptr;  // an identity step: the variable is the loaded operand
    groups_[gi].steps.push_back(std::move(step));
    groups_[gi].group.nodes.push_back(name);
    groups_[gi].group.ops.push_back("copy");
    groups_[gi].group.outputs.push_back(GroupOutput{name, groups_[gi].steps.back().var, src.sizes});
    memory_[name] = Layout::contiguous(name, src.sizes);
    producer_[name] = gi;
    return memory_[name];
  }

  std::string materialize_output(const std::string& value) {
    if (constants_.count(value)) FT_USER_ERROR("the model returns a constant tensor (" + value + "); that is not lowered");
    if (fused_.count(value)) materialize(value);
    const Layout& l = memory_.at(value);
    const ValueInfo& base = g_.value(l.base);
    if (l.is_contiguous() && l.sizes == base.shape) return l.base;
    const Node fake{value, "copy", json::array(), json::object(), ""};
    return copy_to_memory(l, fake).base;
  }

  const Graph& g_;
  std::vector<Building> groups_;
  std::map<std::string, Fused> fused_;
  std::map<std::string, Layout> memory_;  // values readable from memory, as views of a base
  std::map<std::string, int> producer_;   // base value -> group writing it (-1: model input)
  std::map<std::string, std::string> constants_;  // value -> float literal (scalar_tensor)
  std::map<std::string, const Node*> tuples_;     // max pooling with indices, until getitem
  int var_count_ = 0;
};

}  // namespace

int64_t Group::numel() const { return numel_of(index_shape); }

std::vector<std::string> Group::input_values() const {
  std::vector<std::string> v;
  for (const Slot& s : slots)
    if (s.access != Access::Output && std::find(v.begin(), v.end(), s.layout.base) == v.end())
      v.push_back(s.layout.base);
  return v;
}

int64_t Group::bytes_moved(const std::map<std::string, int64_t>& value_numel) const {
  int64_t bytes = 0;
  for (const auto& v : input_values()) bytes += 4 * value_numel.at(v);
  for (const auto& o : outputs) bytes += 4 * numel_of(o.shape);
  return bytes;
}

json Group::to_json() const {
  json j;
  j["id"] = id;
  j["family"] = family;
  j["nodes"] = nodes;
  j["ops"] = ops;
  j["index_shape"] = index_shape;
  if (family == "gemm") j["gemm"] = {{"m", m}, {"n", n}, {"k", k}, {"batch", batch}, {"bias_slot", bias_slot}};
  if (family == "reduce")
    j["reduce"] = {{"outputs", m}, {"reduced", k}, {"stats", stats}, {"passes", passes}, {"full_outputs", full_outputs}};
  j["slots"] = json::array();
  for (const Slot& s : slots)
    j["slots"].push_back(json{{"value", s.layout.base}, {"access", access_name(s.access)}, {"sizes", s.layout.sizes},
                          {"strides", s.layout.strides}, {"offset", s.layout.offset}});
  j["inputs"] = input_values();
  j["outputs"] = json::array();
  for (const auto& o : outputs) j["outputs"].push_back(json{{"value", o.value}, {"shape", o.shape}});
  return j;
}

Group Group::from_json(const json& j) {
  Group g;
  g.id = j.at("id").get<std::string>();
  g.family = j.at("family").get<std::string>();
  g.nodes = j.at("nodes").get<std::vector<std::string>>();
  g.ops = j.at("ops").get<std::vector<std::string>>();
  g.index_shape = j.at("index_shape").get<std::vector<int64_t>>();
  if (j.contains("gemm")) {
    const json& m = j.at("gemm");
    g.m = m.at("m"); g.n = m.at("n"); g.k = m.at("k"); g.batch = m.at("batch");
    g.bias_slot = m.value("bias_slot", -1);
  }
  if (j.contains("reduce")) {
    const json& r = j.at("reduce");
    g.m = r.at("outputs");
    g.k = r.at("reduced");
    g.stats = r.value("stats", 0);
    g.passes = r.value("passes", 0);
    g.full_outputs = r.value("full_outputs", 0);
  }
  for (const json& s : j.at("slots")) {
    const std::string access = s.at("access").get<std::string>();
    Access a = access == "operand" ? Access::Operand : access == "full" ? Access::Full
             : access == "strided" ? Access::Strided : Access::Output;
    g.slots.push_back(Slot{Layout{s.at("value").get<std::string>(), s.at("sizes").get<std::vector<int64_t>>(),
                                  s.at("strides").get<std::vector<int64_t>>(), s.at("offset").get<int64_t>()}, a});
  }
  for (const json& o : j.at("outputs"))
    g.outputs.push_back(GroupOutput{o.at("value").get<std::string>(), "", o.at("shape").get<std::vector<int64_t>>()});
  return g;
}

json Plan::to_json() const {
  json j;
  j["groups"] = json::array();
  for (const auto& g : groups) j["groups"].push_back(g.to_json());
  j["outputs"] = outputs;
  return j;
}

Plan plan_graph(const Graph& g) {
  for (const json& m : g.mutations)
    FT_USER_ERROR("forward updates " + m.value("kind", std::string("state")) + " " + m.value("target", m.value("value", std::string("?"))) +
                  " in place (e.g. BatchNorm running statistics); no kernel family lowers state updates yet");
  return Planner(g).run();
}

}  // namespace fusetune
