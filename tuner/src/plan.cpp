// The planner: walks the graph once in order, joining each elementwise op to the group of its
// fused operands where that keeps one output element per index, and starting a group at each
// anchor (matrix product). Values leave a group (are written to memory) only when something
// outside it needs them.
#include "plan.h"

#include <algorithm>

#include "error.h"
#include "families.h"
#include "fusetune_args.h"
#include "ops.h"

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

// A value computed inside a group and still held in a register there.
struct Fused {
  int group;
  std::string var;
  std::vector<int64_t> shape;
};

// One op of a group's chain and how each tensor operand is reached.
struct Step {
  const Node* node;
  std::string var;
  bool anchor = false;
  std::map<std::string, std::string> fused_operands;  // value -> var
  std::map<std::string, Layout> loaded_operands;      // value -> layout aligned to the node's shape
};

struct Building {
  Group group;
  std::vector<Step> steps;
  Layout a, b;  // gemm operands
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
    for (auto& b : groups_) plan.groups.push_back(finalize(b));
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
    if (out.kind == "tuple") unsupported(n, "ops with several outputs are not lowered yet");
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
        fused_[n.name] = Fused{f.group, f.var, shape};
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
    if (target < 0) {  // no fused operand: join the latest group over the same elements
      for (int gi = (int)groups_.size() - 1; gi > latest_producer && target < 0; --gi)
        if (groups_[gi].group.numel() == numel_of(out.shape)) target = gi;
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

  Group finalize(Building& b);

  const Graph& g_;
  std::vector<Building> groups_;
  std::map<std::string, Fused> fused_;
  std::map<std::string, Layout> memory_;  // values readable from memory, as views of a base
  std::map<std::string, int> producer_;   // base value -> group writing it (-1: model input)
  std::map<std::string, std::string> constants_;  // value -> float literal (scalar_tensor)
  int var_count_ = 0;
};

// addmm's bias when it is one value per output column and alpha = beta = 1: a library can add it
// inside the product (the epilogue then applies the Op with kBiasInProduct).
const Layout* per_column_bias(const Node& n, const std::map<std::string, Layout>& loaded) {
  if (n.op != "aten.addmm.default" && n.op != "aten.baddbmm.default") return nullptr;
  for (const auto& [i, name] : {std::pair<size_t, const char*>{3, "beta"}, {4, "alpha"}}) {
    const json& v = node_arg(n, i, name);
    if (!v.is_null() && !(is_number(v) && number(v) == 1.0)) return nullptr;
  }
  const json& bias = node_arg(n, 0, "self");
  if (!is_value_ref(bias) || !loaded.count(value_ref(bias))) return nullptr;
  const Layout& l = loaded.at(value_ref(bias));
  for (size_t d = 0; d + 1 < l.strides.size(); ++d)
    if (l.strides[d] != 0) return nullptr;
  return !l.strides.empty() && l.strides.back() == 1 ? &l : nullptr;
}

Group Planner::finalize(Building& b) {
  Group& gr = b.group;
  const bool anchored = gr.family != "elementwise";
  if (anchored) {
    gr.slots.push_back(Slot{b.a, Access::Operand});
    gr.slots.push_back(Slot{b.b, Access::Operand});
  }
  auto slot_of = [&](const Layout& l, Access access) {
    for (size_t i = 0; i < gr.slots.size(); ++i)
      if (gr.slots[i].access == access && gr.slots[i].layout == l) return (int)i;
    gr.slots.push_back(Slot{l, access});
    return (int)gr.slots.size() - 1;
  };
  const int64_t numel = gr.numel();
  gr.full_slot = (int)gr.slots.size();
  for (const Step& s : b.steps)
    for (const auto& [v, l] : s.loaded_operands)
      if (l.is_contiguous() && l.numel() == numel) slot_of(l, Access::Full);
  gr.n_full = (int)gr.slots.size() - gr.full_slot;
  for (const Step& s : b.steps)
    for (const auto& [v, l] : s.loaded_operands)
      if (!(l.is_contiguous() && l.numel() == numel)) slot_of(l, Access::Strided);
  gr.out_slot = (int)gr.slots.size();
  for (const GroupOutput& o : gr.outputs) gr.slots.push_back(Slot{Layout::contiguous(o.value, o.shape), Access::Output});
  if ((int)gr.slots.size() > kMaxSlots)
    FT_USER_ERROR("group " + gr.id + " (" + gr.nodes.front() + ") needs " + std::to_string(gr.slots.size()) +
                  " tensors; a kernel takes at most " + std::to_string(kMaxSlots));

  const int anchor_inputs = anchored ? 1 : 0;
  auto load_expr = [&](const Layout& l) {
    for (int i = gr.full_slot; i < gr.full_slot + gr.n_full; ++i)
      if (gr.slots[i].layout == l) return "x[" + std::to_string(anchor_inputs + i - gr.full_slot) + "]";
    const int s = slot_of(l, Access::Strided);
    return "fusetune::load_strided<" + std::to_string(l.sizes.size()) + ">(a, " + std::to_string(s) + ", idx)";
  };
  std::string body;
  for (const Step& s : b.steps) {
    std::string expr;
    if (!s.node) {
      expr = load_expr(s.loaded_operands.begin()->second);
    } else {
      const Node& n = *s.node;
      ArgExpr arg = [&](size_t i, const char* kw) -> std::string {
        const json& a = node_arg(n, i, kw);
        if (is_value_ref(a)) {
          const std::string v = value_ref(a);
          if (auto it = s.fused_operands.find(v); it != s.fused_operands.end()) return it->second;
          return load_expr(s.loaded_operands.at(v));
        }
        if (is_number(a)) return float_literal(number(a));
        if (a.is_string()) return a.get<std::string>();
        return "";
      };
      expr = s.anchor ? family_by_name(gr.family).anchor_expr(n, arg) : elementwise_expr(n, arg);
      if (s.anchor) {
        if (const Layout* bias = per_column_bias(n, s.loaded_operands)) {
          gr.bias_slot = slot_of(*bias, Access::Strided);
          expr = "(kBiasInProduct ? x[0] : " + expr + ")";
        }
      }
    }
    body += "    const float " + s.var + " = " + expr + ";\n";
  }
  for (size_t o = 0; o < gr.outputs.size(); ++o)
    body += "    y[" + std::to_string(o) + "] = " + gr.outputs[o].var + ";\n";
  const int n_in = std::max(1, anchor_inputs + gr.n_full);
  gr.op_struct = "namespace fusetune_gen {\nstruct " + gr.id + "_op {\n" +
                 "  static constexpr int kFullSlot = " + std::to_string(gr.full_slot) + ";\n" +
                 "  static constexpr int kFull = " + std::to_string(gr.n_full) + ";\n" +
                 "  static constexpr int kOutSlot = " + std::to_string(gr.out_slot) + ";\n" +
                 "  static constexpr int kOut = " + std::to_string(gr.outputs.size()) + ";\n" +
                 "  static constexpr int kIn = " + std::to_string(n_in) + ";\n" +
                 "  template <int MATH, bool kBiasInProduct = false>\n" +
                 "  __device__ __forceinline__ static void apply(const fusetune::KernelArgs& a, long long idx,\n" +
                 "                                               const float* x, float* y) {\n" +
                 "    (void)a; (void)idx; (void)x;\n" + body + "  }\n};\n}  // namespace fusetune_gen\n";
  return gr;
}

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
  if (family == "reduce") j["reduce"] = {{"outputs", m}, {"reduced", k}};
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
    g.m = j.at("reduce").at("outputs");
    g.k = j.at("reduce").at("reduced");
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
