// Code generation for row groups (templates/reduce.cuh): every tensor the group touches becomes a
// view over the domain with the kept dimensions first and the reduced ones last, merged where all
// views allow, and the group's chain becomes an Op with one function per pass over a row.
#include <algorithm>
#include <functional>
#include <set>

#include "error.h"
#include "fusetune_args.h"
#include "ops.h"
#include "plan_build.h"

namespace fusetune {

std::vector<int64_t> RowInfo::kept() const {
  std::vector<int64_t> out;
  for (size_t d = 0; d < domain.size(); ++d)
    if (!reduced[d]) out.push_back(domain[d]);
  return out;
}

std::vector<int64_t> without_unit_dims(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (int64_t s : shape)
    if (s != 1) out.push_back(s);
  return out;
}

std::optional<Layout> row_to_domain(const RowInfo& row, Layout l) {
  const size_t n_reduced = std::count(row.reduced.begin(), row.reduced.end(), true);
  if (l.sizes.size() + n_reduced != row.domain.size() && l.is_contiguous() &&
      without_unit_dims(l.sizes) == without_unit_dims(row.kept())) {
    // The rows viewed with other size-1 dimensions (e.g. [C] for rows kept as [C, 1, 1]).
    const int64_t offset = l.offset;
    l = Layout::contiguous(l.base, row.kept());
    l.offset = offset;
  }
  if (l.sizes.size() + n_reduced == row.domain.size()) {
    for (size_t d = 0; d < row.domain.size(); ++d)
      if (row.reduced[d]) {
        l.sizes.insert(l.sizes.begin() + d, 1);
        l.strides.insert(l.strides.begin() + d, 0);
      }
  }
  if (l.sizes.size() != row.domain.size()) return std::nullopt;
  return broadcast_to(l, row.domain);
}

std::optional<std::string> cat_fill(const Step& s) {
  std::set<std::string> constants;
  int memory = 0;
  for (const Step::CatPart& part : s.cat) {
    if (auto it = s.fused_operands.find(part.operand); it != s.fused_operands.end()) constants.insert(it->second);
    else ++memory;
  }
  if (memory == 0 || constants.size() > 1) return std::nullopt;
  const std::string zero = float_literal(0.0);
  if (memory > 1 && !constants.empty() && *constants.begin() != zero) return std::nullopt;
  return constants.empty() ? zero : *constants.begin();
}

namespace {

// Reorders every slot's dimensions to kept-then-reduced, drops size-1 dimensions and merges
// neighbours that every slot can walk as one; returns how many dimensions are kept.
int rows_view(const RowInfo& row, std::vector<Slot>& slots) {
  std::vector<int> order;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t d = 0; d < row.domain.size(); ++d)
      if (row.reduced[d] == (pass == 1)) order.push_back((int)d);
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides(slots.size());
  int kept = 0;
  for (int d : order) {
    const bool reduced = row.reduced[d];
    if (row.domain[d] == 1) continue;
    const bool same_part = !sizes.empty() && (reduced == ((int)sizes.size() > kept));
    bool merge = same_part;
    for (size_t s = 0; s < slots.size() && merge; ++s)
      merge = strides[s].back() == slots[s].layout.strides[d] * row.domain[d];
    if (merge) {
      sizes.back() *= row.domain[d];
      for (size_t s = 0; s < slots.size(); ++s) strides[s].back() = slots[s].layout.strides[d];
      continue;
    }
    sizes.push_back(row.domain[d]);
    for (size_t s = 0; s < slots.size(); ++s) strides[s].push_back(slots[s].layout.strides[d]);
    if (!reduced) kept = (int)sizes.size();
  }
  if ((int)sizes.size() == kept) {  // every reduced dimension has size 1
    sizes.push_back(1);
    for (auto& st : strides) st.push_back(0);
  }
  for (size_t s = 0; s < slots.size(); ++s) {
    slots[s].layout.sizes = sizes;
    slots[s].layout.strides = strides[s];
  }
  return kept;
}

// `constexpr int f(int i)` over a small table: i == 0 ? t[0] : i == 1 ? t[1] : ... : -1.
std::string table_fn(const std::string& name, const std::vector<int>& t) {
  std::string body;
  for (size_t i = 0; i < t.size(); ++i) body += "i == " + std::to_string(i) + " ? " + std::to_string(t[i]) + " : ";
  return "  __host__ __device__ static constexpr int " + name + "(int i) { return " + body + "-1; }\n";
}

class RowCodegen {
 public:
  explicit RowCodegen(Building& b) : b_(b), gr_(b.group), row_(b.row) {}

  Group run() {
    int64_t rows = 1, k = 1;
    for (size_t d = 0; d < row_.domain.size(); ++d) (row_.reduced[d] ? k : rows) *= row_.domain[d];
    gr_.m = rows;
    gr_.k = k;
    make_slots();
    const int kept = rows_view(row_, gr_.slots);
    if ((int)gr_.slots.size() > kMaxSlots)
      FT_USER_ERROR("group " + gr_.id + " (" + gr_.nodes.front() + ") needs " + std::to_string(gr_.slots.size()) +
                    " tensors; a kernel takes at most " + std::to_string(kMaxSlots));
    gr_.stats = (int)row_.stats.size();
    gr_.passes = row_.passes;
    gr_.full_outputs = (int)full_outs_.size();
    gr_.scans = (int)row_.scans.size();
    gr_.op_struct = op_struct(kept);
    gr_.varying_inputs = (int)std::count_if(inner_.begin(), inner_.begin() + gr_.out_slot, [](int st) { return st != 0; });
    return gr_;
  }

 private:
  bool reduced_var(const std::string& var) const { return var.rfind("red[", 0) == 0; }

  // The input slot of a loaded operand (its view over the domain, before rows_view reorders it),
  // read over part of each row where `range` says.
  int input_slot(const Layout& l, const std::optional<SlotRange>& range = std::nullopt) {
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (inputs_[i].first == l && inputs_[i].second == range) return (int)i;
    inputs_.emplace_back(l, range);
    return (int)inputs_.size() - 1;
  }

  // The slots of cat step s's memory parts: each part's view over the domain (its coordinates
  // along the concatenated dimension, the only reduced one, are the row's), read over its range.
  std::vector<int> cat_slots(const Step& s) {
    std::vector<int> slots;
    const std::string fill = *cat_fill(s);
    int64_t begin = 0;
    for (const Step::CatPart& part : s.cat) {
      if (auto it = s.loaded_operands.find(part.operand); it != s.loaded_operands.end()) {
        Layout l = it->second;
        l.offset -= part.shift;
        const bool whole = begin == 0 && part.end == (int64_t)gr_.k;
        slots.push_back(input_slot(l, whole ? std::nullopt : std::optional<SlotRange>(SlotRange{begin, part.end, fill})));
      }
      begin = part.end;
    }
    return slots;
  }

  // Inputs (views over the domain) first, then the outputs: Full ones over the domain, Reduced
  // ones over the rows (stride 0 along the reduced dimensions).
  void make_slots() {
    for (const Step& s : b_.steps) {
      if (!s.cat.empty()) cat_slots(s);
      else
        for (const auto& [v, l] : s.loaded_operands) input_slot(l);
    }
    for (const auto& [l, range] : inputs_)  // float32 or half memory (reduce.cuh converts it as it loads)
      gr_.slots.push_back(Slot{l, Access::Strided, b_.dtype_of(l.base), range});
    gr_.full_slot = 0;
    gr_.n_full = 0;
    gr_.out_slot = (int)gr_.slots.size();
    for (size_t o = 0; o < gr_.outputs.size(); ++o) {
      const GroupOutput& out = gr_.outputs[o];
      // A Full value may have been viewed to another shape since: same elements, same order
      // (unless it is written flipped).
      Layout l = out.written_as ? *out.written_as : Layout::contiguous(out.value, reduced_var(out.var) ? out.shape : row_.domain);
      if (reduced_var(out.var)) {
        auto view = row_to_domain(row_, l);
        // A per-row value viewed to another shape of as many elements (argmin's indices viewed
        // back to an image's): the same memory, row after row.
        const Layout rows = Layout::contiguous(out.value, row_.kept());
        if (!view && !out.written_as && l.numel() == rows.numel()) view = row_to_domain(row_, rows);
        if (!view) FT_USER_ERROR("group " + gr_.id + ": output " + out.value + " is not a row of the reduction");
        l = *view;
      }
      if (out.dtype == "int64" && !reduced_var(out.var))
        FT_USER_ERROR("group " + gr_.id + ": output " + out.value + " is int64 per element; a row group stores int64 indices per row only");
      gr_.slots.push_back(Slot{l, Access::Output, out.dtype});
      (reduced_var(out.var) ? reduced_outs_ : full_outs_).push_back((int)o);
    }
  }

  // Expression of operand `a` of step s: a fused variable, a constant, or a load ("x[i]" per
  // element in the passes, "p[i][0]" per row after them).
  std::string arg_expr(const Step& s, const json& a, bool per_row) {
    if (is_value_ref(a)) {
      const std::string v = value_ref(a);
      if (auto it = s.fused_operands.find(v); it != s.fused_operands.end()) return it->second;
      const int slot = input_slot(s.loaded_operands.at(v));  // not a cat part: those are read by cat_slots
      if (!per_row) return "x[" + std::to_string(slot) + "]";
      return typed_load("p[" + std::to_string(slot) + "]", gr_.slots.at(slot).dtype, "[0]");
    }
    if (is_number(a)) return float_literal(number(a));
    if (a.is_string()) return a.get<std::string>();
    return "";
  }

  std::string step_code(const Step& s) {
    if (s.scan >= 0) return "      const float " + s.var + " = sc[" + std::to_string(s.scan) + "];\n";
    if (!s.cat.empty()) {  // the parts' loads, each the fill outside its range, add up to the cat
      std::string sum;
      for (int slot : cat_slots(s)) sum += (sum.empty() ? "x[" : " + x[") + std::to_string(slot) + "]";
      return "      const float " + s.var + " = " + sum + ";\n";
    }
    const bool per_row = s.level == Level::Reduced;
    const ArgExpr arg = [&](size_t i, const char* kw) { return arg_expr(s, node_arg(*s.node, i, kw), per_row); };
    std::string expr = elementwise_expr(*s.node, arg);
    // An element divided by a per-row value (softmax's sum): under MATH 1 a multiplication by
    // its reciprocal, which the compiler computes once per row.
    if (!per_row && s.node->op == "aten.div.Tensor" && reduced_var(arg(1, "other")))
      expr = "fusetune::div_by_row<MATH>(" + arg(0, "self") + ", " + arg(1, "other") + ")";
    return per_row ? "      " + s.var + " = " + expr + ";\n" : "      const float " + s.var + " = " + expr + ";\n";
  }

  // What statistic i folds per element: its node's input (an ExpSum: its partner's; the Max or
  // Min partnering an ArgMax or ArgMin: the arg's). An arg folds the element's index instead.
  std::string stat_input(int i) {
    const StatKind kind = row_.stats[i].kind;
    if (kind == StatKind::ArgMax || kind == StatKind::ArgMin) return "0.f";
    const int source = kind == StatKind::ExpSum ? row_.stats[i].partner : i;
    for (const Step& s : b_.steps) {
      if (s.stat < 0) continue;
      const RowStat& st = row_.stats[s.stat];
      const bool arg_of = (st.kind == StatKind::ArgMax || st.kind == StatKind::ArgMin) && st.partner == source;
      if (s.stat == source || arg_of) return arg_expr(s, s.node->args.at(0), false);
    }
    FT_THROW("statistic without a reduction step");
  }

  std::string stat_result(const Step& s) {
    const RowStat& st = row_.stats[s.stat];
    const std::string acc = "s[" + std::to_string(s.stat) + "]";
    if (st.kind == StatKind::ExpSum)
      return "fusetune::expsum_value<MATH>(" + acc + ", s[" + std::to_string(st.partner) + "], " + st.shift + ")";
    return st.mean ? acc + " / (float)a.k" : acc;
  }

  // The per-element steps (no statistics) among those `eligible` that the variables in `need`
  // depend on, in order: only code whose result is used.
  std::string full_steps(std::set<std::string> need, const std::function<bool(const Step&)>& eligible) {
    std::vector<const Step*> picked;
    for (auto it = b_.steps.rbegin(); it != b_.steps.rend(); ++it) {
      if (it->stat >= 0 || it->level != Level::Full || !eligible(*it) || !need.count(it->var)) continue;
      picked.push_back(&*it);
      if (it->scan >= 0) continue;  // a scan's result comes from sc[], not from its operand here
      for (const auto& operand : it->fused_operands) need.insert(operand.second);
    }
    std::string body;
    for (auto it = picked.rbegin(); it != picked.rend(); ++it) body += step_code(**it);
    return body;
  }

  std::string values_fn() {
    std::string body;
    for (int p = 0; p < row_.passes; ++p) {
      body += std::string(p ? " else " : "    ") + "if constexpr (P == " + std::to_string(p) + ") {\n";
      std::set<std::string> need;
      for (size_t i = 0; i < row_.stats.size(); ++i)
        if (row_.stats[i].pass == p) need.insert(stat_input((int)i));
      body += full_steps(need, [p](const Step& s) { return s.phase <= p; });
      for (size_t i = 0; i < row_.stats.size(); ++i)
        if (row_.stats[i].pass == p) body += "      v[" + std::to_string(i) + "] = " + stat_input((int)i) + ";\n";
      body += "    }";
    }
    return "  template <int P, int MATH>\n"
           "  __device__ __forceinline__ static void values(const float* x, const float* red, float* v) {\n"
           "    (void)x; (void)red; (void)v;\n" + body + "\n  }\n";
  }

  std::string after_fn() {
    std::string body;
    for (int p = 0; p < row_.passes; ++p) {
      body += std::string(p ? " else " : "    ") + "if constexpr (P == " + std::to_string(p) + ") {\n";
      for (const Step& s : b_.steps) {
        if (s.level != Level::Reduced) continue;
        if (s.stat >= 0 && row_.stats[s.stat].pass == p) body += "      " + s.var + " = " + stat_result(s) + ";\n";
        else if (s.stat < 0 && std::max(s.phase, 1) - 1 == p) body += step_code(s);
      }
      body += "    }";
    }
    return "  template <int P, int MATH>\n"
           "  __device__ __forceinline__ static void after(const fusetune::KernelArgs& a, float* const* p, const float* s,\n"
           "                                               float* red) {\n"
           "    (void)a; (void)p; (void)s; (void)red;\n" + body + "\n  }\n";
  }

  // The inputs of the scans (sv[i]) per element, in the final pass.
  std::string scan_values_fn() {
    std::set<std::string> need;
    for (const Step& s : b_.steps)
      if (s.scan >= 0) need.insert(arg_expr(s, s.node->args.at(0), false));
    std::string body = full_steps(need, [](const Step& s) { return s.phase < kScanPhase; });
    for (const Step& s : b_.steps)
      if (s.scan >= 0) body += "      sv[" + std::to_string(s.scan) + "] = " + arg_expr(s, s.node->args.at(0), false) + ";\n";
    return "  template <int MATH>\n"
           "  __device__ __forceinline__ static void scan_values(const float* x, const float* red, float* sv) {\n"
           "    (void)x; (void)red; (void)sv;\n    {\n" + body + "    }\n  }\n";
  }

  // The Full outputs per element, given the scans' inclusive results sc[] at that element.
  std::string out_fn() {
    std::set<std::string> need;
    for (int o : full_outs_) need.insert(gr_.outputs[o].var);
    std::string body = full_steps(need, [](const Step&) { return true; });
    for (size_t j = 0; j < full_outs_.size(); ++j)
      body += "      y[" + std::to_string(j) + "] = " + gr_.outputs[full_outs_[j]].var + ";\n";
    return "  template <int MATH>\n"
           "  __device__ __forceinline__ static void out(const float* x, const float* red, const float* sc, float* y) {\n"
           "    (void)x; (void)red; (void)sc; (void)y;\n    {\n" + body + "    }\n  }\n";
  }

  std::string store_reduced_fn() {
    std::string body;
    for (int o : reduced_outs_) {
      const std::string slot = std::to_string(gr_.out_slot + o);
      // An arg statistic's index: its slot's strides count int64 elements.
      const std::string& dtype = gr_.outputs[o].dtype;
      const std::string& var = gr_.outputs[o].var;
      if (dtype == "int64")
        body += "    reinterpret_cast<long long*>(a.ptr[" + slot + "])[row_offset(" + slot + ", o)] = (long long)" + var + ";\n";
      else if (is_half(dtype))  // p points at the row's half element (reduce.cuh slot_at)
        body += "    *reinterpret_cast<unsigned short*>(p[" + slot + "]) = fusetune::float_to_" + half_suffix(dtype) + "(" + var + ");\n";
      else
        body += "    p[" + slot + "][0] = " + var + ";\n";
    }
    return "  __device__ __forceinline__ static void store_reduced(const fusetune::KernelArgs& a, long long o, float* const* p,\n"
           "                                                      const float* red) {\n"
           "    (void)a; (void)o; (void)p; (void)red;\n" + body + "  }\n";
  }

  // Each slot's offsets of row o (its kept dimensions) and of element r of a row (its reduced
  // ones), sizes and strides as literals; and how rows move in vectors (see reduce.cuh's Row):
  // kOneRun when every slot walks a row as one run of stride 1 or 0 (any start, any length),
  // kVec the widest V for which V elements from a multiple of V are one vector in every slot
  // otherwise (a row of runs, e.g. GroupNorm's channels with a per-channel weight).
  // Across rows: kRowVec the widest V for which element r of rows o .. o + V - 1 (o a multiple of
  // V) is one vector, or one shared value, in every slot loaded or stored per element (rows along
  // an inner dimension, e.g. a norm over NCHW channels); row_stride is each slot's innermost kept
  // stride (0, 1, 2: other).
  std::string offsets_fn(int kept) {
    std::string rows, elems;
    inner_.clear();
    std::vector<int> row_inner;
    bool one_run = true;
    int vec = 8, row_vec = 4;
    for (size_t s = 0; s < gr_.slots.size(); ++s) {
      const Layout& l = gr_.slots[s].layout;
      const Layout row_part{l.base, {l.sizes.begin(), l.sizes.begin() + kept}, {l.strides.begin(), l.strides.begin() + kept}, 0};
      const Layout elem_part{l.base, {l.sizes.begin() + kept, l.sizes.end()}, {l.strides.begin() + kept, l.strides.end()}, 0};
      const std::string slot = std::to_string(s);
      rows += "    if (s == " + slot + ") return " + offset_expr(row_part, "o") + ";\n";
      elems += "    if (s == " + slot + ") return " + offset_expr(elem_part, "r") + ";\n";
      const Layout m = merged_dims(elem_part);
      const int64_t st = m.sizes.empty() ? 0 : m.strides.back();
      inner_.push_back(st == 0 || st == 1 ? (int)st : 2);
      one_run &= m.sizes.size() <= 1 && (st == 0 || st == 1);  // not a reversed run (a flip)
      for (; vec > 1; vec /= 2) {
        bool ok = !m.sizes.empty() && (st == 0 || st == 1) && m.sizes.back() % vec == 0;
        for (size_t d = 0; d + 1 < m.sizes.size() && ok && st == 1; ++d) ok = m.strides[d] % vec == 0;
        if (ok) break;
      }
      const Layout r = merged_dims(row_part);
      const int64_t rst = r.sizes.empty() ? 0 : r.strides.back();
      row_inner.push_back(rst == 0 || rst == 1 ? (int)rst : 2);
      const bool output = (int)s >= gr_.out_slot;  // stored per row (reduced) or per element
      const bool per_row = output && std::count(reduced_outs_.begin(), reduced_outs_.end(), (int)s - gr_.out_slot) > 0;
      for (; row_vec > 1 && !per_row; row_vec /= 2) {
        bool ok = gr_.m % row_vec == 0 && (rst == 1 || (rst == 0 && !output));
        for (size_t d = 0; d + 1 < r.sizes.size() && ok && rst == 1; ++d) ok = r.strides[d] % row_vec == 0;
        ok &= rst == 0 || r.sizes.back() % row_vec == 0;
        for (size_t d = 0; d < m.sizes.size() && ok && rst == 1; ++d) ok = m.strides[d] % row_vec == 0;
        if (ok) break;
      }
    }
    gr_.row_vector = row_vec;
    return "  static constexpr bool kOneRun = " + std::string(one_run ? "true" : "false") + ";\n" +
           "  static constexpr int kVec = " + std::to_string(vec) + ";\n" + table_fn("inner_stride", inner_) +
           "  static constexpr int kRowVec = " + std::to_string(row_vec) + ";\n" + table_fn("row_stride", row_inner) +
           "  __device__ __forceinline__ static long long row_offset(int s, long long o) {\n    (void)o;\n" + rows +
           "    return 0;\n  }\n"
           "  __device__ __forceinline__ static long long elem_offset(int s, long long r) {\n    (void)r;\n" + elems +
           "    return 0;\n  }\n";
  }

  // Op::kRanged, and Op::in_range(s, r) / Op::fill(s): whether element r of a row of slot s is
  // loaded, and what it is where not (SlotRange).
  std::string ranges() const {
    std::string in, fill;
    for (size_t s = 0; s < gr_.slots.size(); ++s) {
      const auto& r = gr_.slots[s].range;
      if (!r) continue;
      const std::string slot = std::to_string(s);
      in += "    if (s == " + slot + ") return r >= " + std::to_string(r->begin) + "LL && r < " + std::to_string(r->end) + "LL;\n";
      fill += "    if (s == " + slot + ") return " + r->fill + ";\n";
    }
    return "  static constexpr bool kRanged = " + std::string(in.empty() ? "false" : "true") + ";\n" +
           "  __device__ __forceinline__ static bool in_range(int s, long long r) {\n    (void)s; (void)r;\n" + in +
           "    return true;\n  }\n"
           "  __device__ __forceinline__ static float fill(int s) {\n    (void)s;\n" + fill + "    return 0.f;\n  }\n";
  }

  std::string op_struct(int kept) {
    std::vector<int> kinds, passes, partners, full_slots, scans;
    for (ScanKind k : row_.scans) scans.push_back((int)k);
    for (const RowStat& s : row_.stats) {
      kinds.push_back((int)s.kind);
      passes.push_back(s.pass);
      partners.push_back(s.partner);
    }
    for (int o : full_outs_) full_slots.push_back(gr_.out_slot + o);
    // reduce.cuh's Op::slot_kind: 0 float32 (int64 too: not through p), 1 float16, 2 bfloat16, 3 bool.
    std::vector<int> slot_kinds;
    for (const Slot& slot : gr_.slots) slot_kinds.push_back(slot.dtype == "bool" ? 3 : half_kind(slot.dtype));
    const std::string values = values_fn(), after = after_fn(), out = scan_values_fn() + out_fn(), store = store_reduced_fn();
    auto c = [](const char* name, int64_t v) { return "  static constexpr int " + std::string(name) + " = " + std::to_string(v) + ";\n"; };
    return "namespace fusetune_gen {\nstruct " + gr_.id + "_op {\n" +
           c("kIn", gr_.out_slot) + c("kSlots", (int64_t)gr_.slots.size()) + c("kStats", std::max<int64_t>(1, row_.stats.size())) +
           c("kPasses", row_.passes) + c("kReduced", std::max(1, row_.n_reduced)) +
           c("kFullOut", (int64_t)full_outs_.size()) + c("kScans", (int64_t)row_.scans.size()) +
           table_fn("stat_kind", kinds) + table_fn("stat_pass", passes) + table_fn("scan_kind", scans) +
           table_fn("stat_partner", partners) + table_fn("full_out_slot", full_slots) +
           "  static constexpr bool kTypedSlots = " +
           (std::any_of(slot_kinds.begin(), slot_kinds.end(), [](int k) { return k != 0; }) ? "true" : "false") + ";\n" +
           table_fn("slot_kind", slot_kinds) + offsets_fn(kept) + ranges() + values + after + out + store +
           "};\n}  // namespace fusetune_gen\n";
  }

  Building& b_;
  Group& gr_;
  const RowInfo& row_;
  std::vector<std::pair<Layout, std::optional<SlotRange>>> inputs_;  // input slots as views over the domain
  std::vector<int> full_outs_, reduced_outs_;  // indices into gr_.outputs
  std::vector<int> inner_;                     // each slot's innermost reduced stride (0, 1, 2: other)
};

}  // namespace

Group finalize_rows(Building& b) { return RowCodegen(b).run(); }

}  // namespace fusetune
