// The planner: walks the graph once in order, joining each elementwise op to the group of its
// fused operands where that keeps one output element per index, and starting a group at each
// anchor (matrix product). Values leave a group (are written to memory) only when something
// outside it needs them.
#include "plan.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <tuple>

#include "error.h"
#include "families.h"
#include "fusetune_args.h"
#include "ops.h"
#include "plan_build.h"
#include "planner.h"
#include "pool.h"

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

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

namespace {

// What a group's kernel and binding are, without its names: its code, shapes and family
// parameters, its tensors' layouts and shapes, which of them are the same tensor, and which
// outputs a binding stores into state. A slot's offset counts only as the alignment it gives the
// pointer (16 bytes: vector loads, TMA, cuBLASLt); the binding takes the offsets where twins' differ.
std::string kernel_identity(const Graph& g, const Plan& plan, const Group& gr) {
  json j = gr.to_json();
  for (const char* key : {"id", "nodes", "inputs"}) j.erase(key);
  std::map<std::string, int> index;  // value name -> its order of first appearance in the slots
  for (json& s : j["slots"]) {
    const std::string v = s["value"];
    index.emplace(v, (int)index.size());
    s["value"] = index.at(v);
    s["value_shape"] = g.values.count(v) ? json(g.values.at(v).shape) : json();
    s["offset"] = s["offset"].get<int64_t>() * dtype_bytes(s["dtype"]) % 16;
  }
  for (json& o : j["outputs"]) {
    const std::string v = o["value"];
    o["value"] = index.count(v) ? index.at(v) : -1;
    o["stores"] = std::count_if(plan.mutations.begin(), plan.mutations.end(), [&](const Mutation& m) { return m.value == v; });
  }
  // The code, with its struct's name and its values' variables (numbered across the whole plan)
  // named in order of appearance.
  std::string code = std::regex_replace(gr.op_struct, std::regex("\\b" + gr.id + "_op\\b"), "op");
  std::map<std::string, std::string> var;
  static const std::regex variable("\\bv[0-9]+");  // v12, and v12 of v12_at
  std::string renamed;
  auto last = code.cbegin();
  for (std::sregex_iterator m(code.begin(), code.end(), variable), end; m != end; ++m) {
    renamed.append(last, (*m)[0].first);
    renamed += var.emplace(m->str(), "v" + std::to_string(var.size())).first->second;
    last = (*m)[0].second;
  }
  renamed.append(last, code.cend());
  j["op_struct"] = renamed;
  return j.dump();
}

// Marks each group whose kernel identity an earlier group has (Group::same_as).
void mark_twins(const Graph& g, Plan& plan) {
  std::map<std::string, std::string> first;  // kernel identity -> the first group with it
  for (Group& gr : plan.groups) {
    const auto [it, added] = first.emplace(kernel_identity(g, plan, gr), gr.id);
    if (!added) gr.same_as = it->second;
  }
}

// Ops drawing random numbers (torch.randn in forward, rand_like, bernoulli, ...): PyTorch's
// generator state decides their values, which no kernel of ours can reproduce.
bool draws_random(const std::string& op) {
  static const char* const kPrefixes[] = {"aten.rand", "aten.normal", "aten.bernoulli", "aten.uniform",
                                          "aten.exponential", "aten.multinomial", "aten.poisson",
                                          "aten.cauchy", "aten.geometric", "aten.log_normal"};
  for (const char* p : kPrefixes)
    if (op.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

Planner::Planner(const Graph& g) : g_(g) {
  for (const auto& [name, v] : g.values) {
    if (v.kind == "input" || v.kind == "parameter" || v.kind == "buffer" || v.kind == "constant") {
      // Contiguous whatever capture saw: the bindings require contiguous inputs and the
      // reference tensors are saved contiguous.
      memory_[name] = Layout::contiguous(name, v.shape);
      producer_[name] = -1;
    }
  }
  for (const Node& n : g.nodes)
    for_each_ref(n, [&](const std::string& v) {
      ++pending_users_[v];
      std::vector<const Node*>& r = readers_[v];
      if (r.empty() || r.back() != &n) r.push_back(&n);
    });
  for (const std::string& v : g.outputs) kept_.insert(v);
  for (const json& m : g.mutations) kept_.insert(m.at("value").get<std::string>());
}

// Every value node n reads, in its arguments and keyword arguments (a cat's list too).
void Planner::for_each_ref(const Node& n, const std::function<void(const std::string&)>& f) {
  std::function<void(const json&)> walk = [&](const json& a) {
    if (is_value_ref(a)) f(value_ref(a));
    else if (a.is_array()) for (const json& x : a) walk(x);
  };
  walk(n.args);
  for (const auto& [k, v] : n.kwargs.items()) walk(v);
}

// The nodes reading v, each once, in graph order.
const std::vector<const Node*>& Planner::readers_of(const std::string& v) const {
  static const std::vector<const Node*> none;
  const auto it = readers_.find(v);
  return it == readers_.end() ? none : it->second;
}

// Whether a reduction or scan reads v, directly or through elementwise ops and views.
bool Planner::feeds_row_op(const std::string& v) const {
  std::vector<std::string> todo{v};
  std::set<std::string> seen{v};
  while (!todo.empty() && seen.size() < 256) {
    const std::string value = todo.back();
    todo.pop_back();
    for (const Node* r : readers_of(value)) {
      if (is_reduction_op(r->op) || is_scan_op(r->op)) return true;
      if ((is_elementwise_op(r->op) || is_view_op(r->op) || is_identity_op(r->op)) && seen.insert(r->name).second)
        todo.push_back(r->name);
    }
  }
  return false;
}

Plan Planner::run() {
  for (const Node& n : g_.nodes) {
    for_each_ref(n, [&](const std::string& v) { --pending_users_[v]; });  // n is planned now
    visit(n);
  }
  Plan plan;
  for (const auto& out : g_.outputs) plan.outputs.push_back(materialize_output(out));
  for (const json& m : g_.mutations)
    if (auto mutation = add_mutation(m)) plan.mutations.push_back(*mutation);
  for (auto& b : groups_) plan.groups.push_back(b.group.family == "reduce" ? finalize_rows(b) : finalize_group(b));
  mark_twins(g_, plan);
  return plan;
}

// The new value of an updated buffer or input, written by its group and stored by that group's
// binding: no later group may read the old value. None where forward sets the state to the value
// it holds (`self.h0 = self.h0.to(x.device)`).
std::optional<Mutation> Planner::add_mutation(const json& m) {
  const std::string value = m.at("value").get<std::string>(), kind = m.at("kind").get<std::string>(),
                    target = m.at("target").get<std::string>();
  std::string old;  // the graph value holding the state before forward
  for (const auto& [name, v] : g_.values)
    if (kind == "buffer" ? v.kind == "buffer" && v.target == target : name == target) old = name;
  if (!fused_.count(value) && memory_.count(value) && producer_.count(value) && producer_.at(value) < 0) {
    const Layout& l = memory_.at(value);
    if (l == Layout::contiguous(old, g_.value(value).shape)) return std::nullopt;
    // Another input as it is (`self.c0 = self.h0`): a kernel of its own copies it, its binding stores it.
    if (l.base != value) {
      const Node fake{value, "copy", json::array(), json::object(), ""};
      copy_to_memory(l, fake, value);
    }
  }
  const Mutation mutation{materialize_output(value), kind, target};
  if (!producer_.count(mutation.value) || producer_.at(mutation.value) < 0)
    FT_USER_ERROR("forward stores " + mutation.value + " into " + mutation.target +
                  " unchanged; fusetune lowers state updates computed by its kernels only");
  for (size_t gi = producer_.at(mutation.value) + 1; gi < groups_.size(); ++gi)
    for (const Step& s : groups_[gi].steps)
      for (const auto& [operand, l] : s.loaded_operands)
        if (l.base == old)
          FT_USER_ERROR("forward reads " + mutation.target + " after computing its new value in a kernel that runs earlier; "
                        "fusetune stores state updates when their kernel runs, so this order is not lowered");
  return mutation;
}

void Planner::unsupported(const Node& n, const std::string& why) {
  FT_USER_ERROR("cannot lower " + n.op + " (" + (n.source.empty() ? n.name : n.source) + "): " + why);
}

// The dtype of value's elements in memory: a comparison's result that a kernel wrote is float 0 / 1
// (see materialize); a bool the model gives (an input, a buffer) is one byte each; a float32
// value stored in half (store_half) is half.
std::string Planner::memory_dtype(const std::string& value) const {
  if (const auto it = stored_half_.find(value); it != stored_half_.end()) return it->second;
  const ValueInfo& v = g_.value(value);
  return v.dtype == "bool" && v.kind == "intermediate" ? "float32" : v.dtype;
}

void Planner::check_float(const std::string& value, const Node* n, bool int64_ok) {
  const ValueInfo& v = g_.value(value);
  const std::string dtype = memory_dtype(value);
  if (dtype != "float32" && !(int64_ok && (dtype == "int64" || dtype == "bool" || is_half(dtype)))) {
    const std::string where = n ? " (" + (n->source.empty() ? n->name : n->source) + ")" : "";
    FT_USER_ERROR("value " + value + " has dtype " + v.dtype + where +
                  (int64_ok ? "; fusetune kernels read and write float32 tensors, float16 and bfloat16 ones where they "
                              "are converted, and int64 ones in integer arithmetic (add, sub, mul, neg, abs, minimum, maximum, "
                              "clamp, where, fmod, remainder; and read bool ones)"
                            : "; this op computes float32 tensors only"));
  }
}

// A value read from memory by node n: float32 tensors, and int64 ones where elementwise ops read
// them (converted as PyTorch promotes them, or kept in 64 bits by the int64 ops), and half ones
// there and where half_ok says the reader converts them as it loads (elementwise steps of any
// group, row groups, a product's operands where a family multiplies them); other kernels read a
// half tensor's float32 copy.
const Layout& Planner::operand(const std::string& v, const Node& n, bool int64_ok, bool half_ok) {
  const Layout& l = memory_.at(v);
  const bool half = is_half(memory_dtype(l.base));
  if (half && half_ok) return l;
  if (half && !int64_ok) return float_copy(v, n);
  check_float(l.base, &n, int64_ok);
  return l;
}

// Capture follows every half tensor with its float32 conversion (conversions_), which elementwise
// steps and row groups read from the half memory itself. A kernel that reads floats only (a
// matrix product the TMA GEMM cannot read in half, a pooling...) reads that conversion written out
// in float32, once, by an elementwise group: v, a view of it, becomes the same view of the copy.
const Layout& Planner::float_copy(const std::string& v, const Node& n) {
  const Layout l = memory_.at(v);
  const auto it = conversions_.find(l.base);
  if (it == conversions_.end() || g_.value(v).dtype != "float32")
    FT_USER_ERROR("value " + v + " has dtype " + g_.value(v).dtype + " (" + (n.source.empty() ? n.name : n.source) +
                  "); this op reads float32 tensors only, and capture converts half tensors to float32 where they "
                  "are read");
  const std::string c = it->second;
  const Layout whole = memory_.at(c);
  if (whole.base != c) {  // not written out yet
    if (!(whole == Layout::contiguous(whole.base, whole.sizes))) {  // a strided tensor: v's own elements
      copy_to_memory(l, n, v);
      return memory_.at(v);
    }
    copy_to_memory(whole, n, c);
  }
  memory_[v] = Layout{c, l.sizes, l.strides, l.offset};
  producer_[v] = producer_.at(c);
  return memory_.at(v);
}

void Planner::visit(const Node& n) {
  const ValueInfo& out = g_.value(n.name);
  // A waiting cat is computed for any reader but a view (forward) and a reduction or scan
  // (rows_over), which may read it otherwise.
  if (!is_view_op(n.op) && !is_reduction_op(n.op) && !is_scan_op(n.op))
    for_each_ref(n, [&](const std::string& v) {
      if (cats_.count(v)) realize_cat(v);
    });
  if (out.kind == "tuple" && pool_returns_indices(n.op)) {  // lowered where its values are taken
    tuples_[n.name] = &n;
    return;
  }
  if (n.op == "aten.native_dropout.default")  // torch.export leaves it only where it keeps some elements
    unsupported(n, "dropout in training mode draws random numbers, which no kernel can match element for element; "
                   "tune the model in eval mode (self.eval() in its __init__) or with p = 0");
  if (draws_random(n.op))
    unsupported(n, "forward draws random numbers, which no kernel can match element for element; create the "
                   "tensor in __init__ (a buffer) or take it from get_inputs()");
  if (out.kind == "tuple" && (n.op == "aten.split_with_sizes.default" || n.op == "aten.split.Tensor")) {
    tuples_[n.name] = &n;  // its parts are slices, taken where getitem takes them
    return;
  }
  if (out.kind == "tuple") unsupported(n, "ops with several outputs are not lowered yet");
  if (n.op == "getitem") return add_getitem(n, out);
  if (n.op == "aten.scalar_tensor.default" || n.op == "aten.full.default" || n.op == "aten.full_like.default")
    return add_constant(n, out);
  if (n.op.rfind("aten.arange.", 0) == 0) return add_index(n, out);
  if (n.op == "aten.as_strided.default") check_as_strided(n);
  // Any reader but an elementwise step, a gather or a view (a cat's parts too) reads an index
  // value from memory, written before the reader's group exists.
  const bool identity_or_view = is_identity_op(n.op) || is_view_op(n.op);
  if (!identity_or_view && !is_elementwise_op(n.op) && n.op != "aten.gather.default")
    for_each_ref(n, [&](const std::string& v) {
      if (inlined_index(v)) materialize_index(v);
    });
  if (n.op == "aten.cat.default") return add_cat(n, out);
  if (n.op == "aten.constant_pad_nd.default") return add_pad(n, out);
  if (identity_or_view && is_value_ref(n.args.at(0)) && index_values_.count(value_ref(n.args.at(0))) &&
      g_.value(value_ref(n.args.at(0))).dtype == out.dtype) {  // a view of an index value is one too
    const std::string in = value_ref(n.args.at(0));
    auto view = is_view_op(n.op) ? apply_view(n, index_values_.at(in), out.shape) : index_values_.at(in);
    if (view) {
      index_values_[n.name] = *view;
      return;
    }
    if (!memory_.count(in)) materialize_index(in);  // then viewed as memory below
  }
  if ((is_identity_op(n.op) || is_view_op(n.op)) && is_value_ref(n.args.at(0)) &&
      constants_.count(value_ref(n.args.at(0)))) {  // a view of a constant is the same constant, broadcast
    constants_[n.name] = constants_.at(value_ref(n.args.at(0)));
    return;
  }
  if (is_identity_op(n.op)) {
    const json& dtype = n.kwargs.contains("dtype") ? n.kwargs.at("dtype") : json();
    const std::string in = value_ref(n.args.at(0));
    const std::string to = dtype.is_null() ? g_.value(in).dtype : dtype.value("dtype", "");
    // A rounding to half, a truth (x != 0) as bool, a truncation to int64: computed.
    if (is_half(to) || (to != g_.value(in).dtype && (to == "bool" || to == "int64"))) return add_elementwise(n, out);
    if (to != "float32" && to != g_.value(in).dtype) unsupported(n, "a conversion to " + to + " is not lowered");
    if (g_.value(in).dtype == "int64" && out.dtype != "int64")
      return add_elementwise(n, out);  // a conversion: computed, not a view of the int64 memory
    // A half tensor's float32 conversion is the half memory itself until a kernel that reads
    // floats only needs it (float_copy).
    if (is_half(g_.value(in).dtype) && memory_.count(in) && memory_.at(in).base == in) conversions_[in] = n.name;
    forward(n, in, out.shape, /*is_view=*/false);
  } else if (is_view_op(n.op)) {
    forward(n, value_ref(n.args.at(0)), out.shape, /*is_view=*/true);
  } else if (is_elementwise_op(n.op)) {
    add_elementwise(n, out);
  } else if (is_reduction_op(n.op)) {
    add_reduction(n, out);
  } else if (is_scan_op(n.op)) {
    add_scan(n, out);
  } else if (is_pool_op(n.op)) {
    add_pool(n, n.name, out);
  } else if (n.op == "aten.repeat.default") {
    add_repeat(n, out);
  } else if (n.op == "aten.gather.default") {
    add_gather(n, out);
  } else if (const Family* f = family_anchoring(n.op)) {
    add_anchor(n, out, *f);
  } else {
    unsupported(n, "no kernel family lowers this op yet");
  }
}

// as_strided addresses PyTorch's storage of its input; the planner's layouts address the input's
// elements. They agree where the input is row-major in that storage from its start: its strides
// are (those of a view may start elsewhere in a storage they share), and it is no view's result.
void Planner::check_as_strided(const Node& n) {
  const std::string in = value_ref(n.args.at(0));
  const ValueInfo& v = g_.value(in);
  if (!Layout{in, v.shape, v.strides, 0}.is_contiguous())
    unsupported(n, "its input is not contiguous in PyTorch's memory, where as_strided's strides count");
  for (const Node& m : g_.nodes)
    if (m.name == in && is_view_op(m.op))
      unsupported(n, "its input is a view (" + m.op + "), whose place in PyTorch's memory is not known");
}

// Identity and view ops produce no code: the result is the same register or a new layout.
void Planner::forward(const Node& n, const std::string& in, const std::vector<int64_t>& shape, bool is_view) {
  if (cats_.count(in)) {
    if (is_view && view_cat(n, in, shape)) return;
    realize_cat(in);
  }
  if (auto it = fused_.find(in); it != fused_.end()) {
    const Fused& f = it->second;
    auto view = is_view ? apply_view(n, Layout::contiguous("", f.shape), shape) : Layout::contiguous("", shape);
    if (view && view->is_contiguous() && view->numel() == numel_of(f.shape)) {
      Fused view = f;
      view.shape = shape;
      fused_[n.name] = view;
      groups_[f.group].fused_views.push_back(n.name);
      // A written row statistic (materialize): the view reads it there too.
      if (auto written = memory_.count(in) ? apply_view(n, memory_.at(in), shape) : std::nullopt) {
        memory_[n.name] = *written;
        producer_[n.name] = producer_.at(written->base);
      }
      return;
    }
    // A transpose (or similar) of a fused value: write it, then view memory.
    if (!(n.op == "aten.flip.default" && materialize_flipped(n, in)) && !materialize_permuted(n, in, shape)) materialize(in);
  }
  const Layout& src = memory_.at(in);
  auto view = is_view ? apply_view(n, src, shape) : std::optional<Layout>(src);
  // A strided value is copied contiguous and viewed again (a contiguous one would not change).
  if (!view && src.base != in) view = apply_view(n, copy_to_memory(src, n, in), shape);
  if (!view) unsupported(n, "view cannot be expressed with strides");
  memory_[n.name] = *view;
  producer_[n.name] = producer_.at(view->base);
}

void Planner::add_index(const Node& n, const ValueInfo& out) {
  if (out.dtype != "int64" && out.dtype != "float32") unsupported(n, "only int64 and float32 aranges are lowered");
  if (out.shape.size() != 1) unsupported(n, "an arange is one-dimensional");
  // arange(end), arange(start, end), arange(start, end, step)
  const bool has_start = n.op == "aten.arange.start" || n.op == "aten.arange.start_step";
  if (!has_start && n.op != "aten.arange.default") unsupported(n, "this arange overload is not lowered");
  const json start = has_start ? node_arg(n, 0, "start") : json(0);
  const json step = n.op == "aten.arange.start_step" ? node_arg(n, 2, "step") : json();
  if (!is_number(start) || !(step.is_null() || is_number(step))) unsupported(n, "start and step must be numbers");
  const bool int64 = out.dtype == "int64";
  const double first = number(start), delta = step.is_null() ? 1.0 : number(step);
  const double last = first + delta * (double)(out.shape[0] - 1);
  Range range = out.shape[0] == 0 ? Range::point(first) : Range{std::min(first, last), std::max(first, last), false};
  // In float32, start + step * offset rounds twice: off by 2^-23 of |start| + |step * offset| at most.
  if (!int64) {
    const double error = (std::fabs(first) + std::fabs(delta) * (double)std::max<int64_t>(out.shape[0] - 1, 0)) * 0x1p-21;
    range = Range{range.lo - error, range.hi + error, false};
  }
  // The offset read as an int, and int64 values computed in ints, where they fit (start + step *
  // offset then stays in range too).
  const bool narrow = out.shape[0] <= 2147483647 && (!int64 || (range.fits_int32() && std::fabs(delta) <= 2147483647.0));
  auto literal = [&](double v) { return !int64 ? float_literal(v) : narrow ? std::to_string((long long)v) : int_literal(v); };
  iotas_[n.name] = Iota{literal(first), literal(delta), n.op, narrow};
  ranges_[n.name] = range;
  index_values_[n.name] = Layout::contiguous(n.name, out.shape);
}

Range Planner::range_of(const std::string& v) const {
  if (auto it = index_values_.find(v); it != index_values_.end()) return ranges_.at(it->second.base);
  if (auto it = ranges_.find(v); it != ranges_.end()) return it->second;  // a constant
  return Range::unknown();
}

std::string Planner::index_expr(const Layout& view, const std::string& idx, Step& step) const {
  // Each coordinate and derived value is declared once per step (index_names).
  auto declare = [&](const std::string& key, const std::string& type, const std::function<std::string()>& expr) {
    if (auto it = step.index_names.find(key); it != step.index_names.end()) return it->second;
    const std::string e = expr();  // declares what it needs first
    const std::string name = step.var + "_i" + std::to_string(step.index_names.size());
    step.index_lines += "    const " + type + " " + name + " = " + e + ";\n";
    return step.index_names[key] = name;
  };
  std::string at = idx;  // the element of view.base: idx itself where the view is the value
  if (view.offset != 0 || !view.is_contiguous() || view.sizes != g_.value(view.base).shape) {
    at = offset_expr(view, idx);
    if (view.offset != 0) at = "(" + int_literal((double)view.offset) + " + " + at + ")";  // a slice or flip of it
  }
  if (auto io = iotas_.find(view.base); io != iotas_.end())
    return "(" + io->second.start + " + " + io->second.step + " * " + (io->second.narrow ? "(int)" + at : at) + ")";
  // A derived value: its op over its operands' values at the same element. One the ranges decide
  // is a literal; a where whose condition they decide is the branch taken.
  const Node& n = *derived_.at(view.base);
  const ValueInfo& out = g_.value(view.base);
  const bool int64 = out.dtype == "int64";
  const Range range = ranges_.at(view.base);
  // An integral value as an int literal where it fits in one.
  auto integer = [](double v) { return Range::point(v).fits_int32() ? std::to_string((long long)v) : int_literal(v); };
  if (range.is_point()) return int64 ? integer(range.lo) : float_literal(range.lo);
  if (at != idx) at = declare("@" + at, "long long", [&] { return at; });
  // v's expression: an int where it fits (an int64 constant, arange or derived value), else a
  // long long.
  auto value_expr = [&](const std::string& v) -> std::string {
    if (constants_.count(v)) return g_.value(v).dtype == "int64" ? integer(range_of(v).lo) : constants_.at(v);
    return index_expr(*broadcast_to(index_values_.at(v), out.shape), at, step);
  };
  if (n.op == "aten.where.self") {
    const json& condition = node_arg(n, 0, "condition");
    const Range c = is_value_ref(condition) ? range_of(value_ref(condition)) : Range::unknown();
    if (c.is_point()) {
      const json& taken = node_arg(n, c.lo != 0 ? 1 : 2, c.lo != 0 ? "self" : "other");
      if (is_value_ref(taken) && g_.value(value_ref(taken)).dtype == out.dtype) return value_expr(value_ref(taken));
      if (is_number(taken)) return int64 && number(taken) == std::floor(number(taken)) ? integer(number(taken)) : float_literal(number(taken));
    }
  }
  // Integer arithmetic (an int64 result, or a comparison of int64 operands): in ints where the
  // result, every operand and every integral number fit in 32 bits and no alpha other than 1 or
  // -1 scales an operand; else in long longs, int operands widened first. Float arithmetic
  // converts int64 operands first, as torch's type promotion does (an int64 division is a true one).
  bool int_operands = true, fits = !int64 || range.fits_int32(), no_nan = !int64;
  for (const auto& [pos, v] : tensor_operands(n)) {
    no_nan &= !range_of(v).nan;
    if (n.op == "aten.where.self" && pos == 0) continue;  // the condition
    int_operands &= g_.value(v).dtype == "int64";
    fits &= g_.value(v).dtype != "int64" || range_of(v).fits_int32();
  }
  const bool ints = int64 || (out.dtype == "bool" && int_operands);
  auto check_number = [&](const json& a) { fits &= !is_number(a) || number(a) != std::floor(number(a)) || Range::point(number(a)).fits_int32(); };
  for (const json& a : n.args) check_number(a);
  for (const auto& [k, a] : n.kwargs.items()) check_number(a);
  const bool scaled = n.op.rfind("aten.add.", 0) == 0 || n.op.rfind("aten.sub.", 0) == 0 || n.op == "aten.rsub.Scalar";
  const json alpha = scaled ? node_arg(n, 2, "alpha") : json();
  const bool narrow = ints && fits && (alpha.is_null() || (is_number(alpha) && std::fabs(number(alpha)) == 1));
  const Arith arith = int64 ? (narrow ? Arith::Int32 : Arith::Int64) : no_nan ? Arith::FloatNoNan : Arith::Float;
  return declare(view.base + "@" + at, int64 ? (range.fits_int32() ? "int" : "long long") : "float", [&] {
    ArgExpr arg = [&](size_t i, const char* kw) -> std::string {
      const json& a = node_arg(n, i, kw);
      if (is_value_ref(a)) {
        const std::string v = value_ref(a), e = value_expr(v);
        if (g_.value(v).dtype != "int64" || narrow) return e;
        if (ints) return "(long long)" + e;
        return n.op == "aten._to_copy.default" ? e : "(float)" + e;
      }
      if (is_number(a)) {
        const double v = number(a);
        return narrow && v == std::floor(v) ? integer(v) : number_literal(v, ints);
      }
      if (a.is_string()) return a.get<std::string>();
      return "";
    };
    return elementwise_expr(n, arg, arith);
  });
}

// An index value that an op other than an elementwise one or a gather reads (or the model's
// output): written by an elementwise group created before the reader's group.
void Planner::materialize_index(const std::string& value) {
  const Layout& view = index_values_.at(value);
  const ValueInfo& v = g_.value(value);
  FT_CHECK(view.sizes == v.shape, "index value " + value + " viewed with another shape");
  const std::string op = iotas_.count(view.base) ? iotas_.at(view.base).op : derived_.at(view.base)->op;
  // reads_index keeps the group from becoming a row group that could read it back.
  groups_[write_unread(value, op, [&](Step& step) { return index_expr(view, "idx", step); })].reads_index = true;
}

void Planner::materialize_constant(const std::string& value) {
  write_unread(value, "aten.full.default", [&](Step&) { return constants_.at(value); });
}

int Planner::write_unread(const std::string& value, const std::string& op, const std::function<std::string(Step&)>& expr) {
  const ValueInfo& v = g_.value(value);
  const int gi = chain_group(v.shape, -1, 0);
  Step step{nullptr, next_var(), false, {}, {}};
  step.int64 = v.dtype == "int64";
  step.index_expr = expr(step);
  const std::string var = step.var;
  add_step(gi, value, op, std::move(step));
  groups_[gi].group.outputs.push_back(GroupOutput{value, var, v.shape, memory_dtype(value)});  // a bool as float 0 / 1
  memory_[value] = Layout::contiguous(value, v.shape);
  producer_[value] = gi;
  return gi;
}

// A float32 or int64 constant made in the graph (scalar_tensor(v), full(size, v),
// full_like(x, v)): inlined as a literal where it is used.
void Planner::add_constant(const Node& n, const ValueInfo& out) {
  const json& v = n.op == "aten.scalar_tensor.default" ? n.args.at(0) : node_arg(n, 1, "fill_value");
  if (!is_number(v) || (out.dtype != "float32" && out.dtype != "int64" && out.dtype != "bool"))
    unsupported(n, "only float32, int64 and bool constants are inlined");
  constants_[n.name] = out.dtype == "int64" ? int_literal(number(v)) : float_literal(number(v));
  ranges_[n.name] = Range::point(out.dtype == "bool" ? (number(v) != 0) : out.dtype == "float32" ? (double)(float)number(v) : number(v));
}

namespace {

// The expression of linear index idx's coordinate along dimension d of `shape`.
std::string coordinate_expr(const std::vector<int64_t>& shape, int64_t d) {
  Layout coordinate{"", shape, std::vector<int64_t>(shape.size(), 0), 0};
  coordinate.strides[d] = 1;
  return offset_expr(coordinate, "idx");
}

}  // namespace

void Planner::add_cat(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const json& parts = n.args.at(0);
  const json& jdim = node_arg(n, 1, "dim");
  const int64_t rank = (int64_t)out.shape.size();
  int64_t dim = jdim.is_null() ? 0 : (int64_t)number(jdim);
  if (dim < 0) dim += rank;
  if (!parts.is_array() || dim < 0 || dim >= rank) unsupported(n, "expected a list of tensors and a dimension of the result");
  std::vector<std::string> values;
  for (const json& p : parts) {
    if (!is_value_ref(p)) unsupported(n, "every part must be a tensor");
    const std::string v = value_ref(p);
    if (numel_of(g_.value(v).shape) == 0) continue;  // torch skips empty parts
    if ((int64_t)g_.value(v).shape.size() != rank) unsupported(n, "parts of another rank than the result");
    if (fused_.count(v)) materialize(v);  // written before this step's group exists
    values.push_back(v);
  }
  Step step{&n, next_var(), false, {}, {}};
  step.cat_at = coordinate_expr(out.shape, dim);
  int latest_producer = -1;
  int64_t start = 0;
  for (size_t k = 0; k < values.size(); ++k) {
    const std::string& v = values[k];
    const std::string key = v + "#" + std::to_string(k);  // a value may be concatenated more than once
    const int64_t end = start + g_.value(v).shape[dim];
    int64_t shift = 0;
    if (constants_.count(v)) {
      step.fused_operands[key] = constants_.at(v);
    } else {
      const Layout& l = operand(v, n);
      step.loaded_operands[key] = Layout{l.base, out.shape, l.strides, l.offset};
      shift = start * l.strides[dim];
      latest_producer = std::max(latest_producer, producer_.at(l.base));
    }
    step.cat.push_back(Step::CatPart{key, end, shift});
    start = end;
  }
  if (start != out.shape[dim]) unsupported(n, "the parts do not add up to the result");
  const bool waits = cat_fill(step) && cat_waits(n.name, dim);
  cats_[n.name] = PendingCat{std::move(step), out.shape, dim, latest_producer};
  if (!waits) realize_cat(n.name);
}

void Planner::realize_cat(const std::string& v) {
  PendingCat c = std::move(cats_.at(v));
  cats_.erase(v);
  const int target = chain_group(c.shape, c.latest_producer, (int)c.step.loaded_operands.size());
  fused_[v] = Fused{target, c.step.var, c.shape};
  add_step(target, v, c.step.node->op, std::move(c.step));
}

bool Planner::view_cat(const Node& n, const std::string& in, const std::vector<int64_t>& shape) {
  if (n.op != "aten.slice.Tensor" || shape.size() != cats_.at(in).shape.size()) return false;
  PendingCat c = cats_.at(in);
  const int64_t d = c.dim;
  const Layout whole = Layout::contiguous("", c.shape);
  const auto box = apply_view(n, whole, shape);
  if (!box || box->strides[d] != whole.strides[d]) return false;  // not a step of 1 along d
  for (auto& [key, l] : c.step.loaded_operands) {  // each part's view sliced alike
    const auto viewed = apply_view(n, l, shape);
    if (!viewed) return false;
    l = *viewed;
  }
  if (shape[d] != c.shape[d]) {  // along d: from `start` on (the only coordinate the slice moves), the parts' ranges moved
    const int64_t start = box->offset / whole.strides[d];
    std::vector<Step::CatPart> parts;
    int64_t begin = 0;
    for (const Step::CatPart& part : c.step.cat) {
      const int64_t lo = std::max<int64_t>(begin - start, 0), hi = std::min<int64_t>(part.end - start, shape[d]);
      begin = part.end;
      if (hi > lo) {
        parts.push_back(Step::CatPart{part.operand, hi, part.shift});
      } else {
        c.step.loaded_operands.erase(part.operand);
        c.step.fused_operands.erase(part.operand);
      }
    }
    c.step.cat = std::move(parts);
  }
  c.shape = shape;
  c.step.var = next_var();
  c.step.cat_at = coordinate_expr(shape, d);
  const bool waits = cat_fill(c.step) && cat_waits(n.name, c.dim);
  cats_[n.name] = std::move(c);
  if (!waits) realize_cat(n.name);  // the slice computed by itself
  return true;
}

void Planner::add_pad(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const std::string in = value_ref(n.args.at(0));
  const std::vector<int64_t> pad = node_arg(n, 1, "pad").get<std::vector<int64_t>>();
  const json& fill = node_arg(n, 2, "value");
  const int64_t rank = (int64_t)out.shape.size();
  if (pad.size() % 2 != 0 || (int64_t)pad.size() > 2 * rank || !(fill.is_null() || is_number(fill)))
    unsupported(n, "expected pairs of pads, at most two a dimension, and a number");
  if (constants_.count(in)) unsupported(n, "padding a constant is not lowered");
  if (fused_.count(in)) materialize(in);  // read at other elements than the result's
  const Layout& l = operand(in, n);
  const std::string value = float_literal(fill.is_null() ? 0.0 : number(fill));
  if (pad_as_cat(n, pad, value, l, out.shape)) return;
  Step step{&n, next_var(), false, {}, {{in, Layout{l.base, out.shape, l.strides, l.offset}}}};
  step.pad_value = value;
  for (size_t i = 0; i < pad.size() / 2; ++i) {  // pairs from the last dimension backwards
    const int64_t d = rank - 1 - (int64_t)i, low = pad[2 * i];
    if (low == 0 && pad[2 * i + 1] == 0) continue;
    step.pad_inside += std::string(step.pad_inside.empty() ? "" : " && ") + "(unsigned long long)(" +
                       coordinate_expr(out.shape, d) + " - " + std::to_string(low) + "LL) < " + std::to_string(l.sizes[d]) + "ULL";
    step.pad_shift += low * l.strides[d];
  }
  if (step.pad_inside.empty()) step.pad_inside = "true";
  const int target = chain_group(out.shape, producer_.at(l.base), 1);
  fused_[n.name] = Fused{target, step.var, out.shape};
  add_step(target, n.name, n.op, std::move(step));
}

bool Planner::pad_as_cat(const Node& n, const std::vector<int64_t>& pad, const std::string& value, const Layout& in,
                         const std::vector<int64_t>& shape) {
  int64_t d = -1, low = 0, high = 0;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    if (pad[2 * i] == 0 && pad[2 * i + 1] == 0) continue;
    if (d >= 0) return false;
    d = (int64_t)shape.size() - 1 - (int64_t)i;
    low = pad[2 * i];
    high = pad[2 * i + 1];
  }
  if (d < 0 || low < 0 || high < 0 || !cat_waits(n.name, d)) return false;
  Step step{&n, next_var(), false, {}, {}};
  step.cat_at = coordinate_expr(shape, d);
  auto constant = [&](int64_t end) {
    const std::string key = "pad#" + std::to_string(step.cat.size());
    step.fused_operands[key] = value;
    step.cat.push_back(Step::CatPart{key, end, 0});
  };
  if (low > 0) constant(low);
  const std::string key = in.base + "#" + std::to_string(step.cat.size());
  step.loaded_operands[key] = Layout{in.base, shape, in.strides, in.offset};
  step.cat.push_back(Step::CatPart{key, low + in.sizes[d], low * in.strides[d]});
  if (high > 0) constant(shape[d]);
  cats_[n.name] = PendingCat{std::move(step), shape, d, producer_.at(in.base)};
  return true;
}

void Planner::add_gather(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const json &jin = n.args.at(0), &jdim = node_arg(n, 1, "dim"), &jindex = node_arg(n, 2, "index");
  const json& sparse = node_arg(n, 3, "sparse_grad");
  if (!is_value_ref(jin) || !is_value_ref(jindex) || !is_number(jdim)) unsupported(n, "the input and the index must be tensors");
  if (sparse.is_boolean() && sparse.get<bool>()) unsupported(n, "sparse_grad is not lowered");
  const std::string in = value_ref(jin), index = value_ref(jindex);
  if (constants_.count(in) || constants_.count(index)) unsupported(n, "a gather from or by a constant is not lowered");
  const std::vector<int64_t>& in_shape = g_.value(in).shape;
  const int64_t rank = (int64_t)in_shape.size();
  int64_t dim = (int64_t)number(jdim);
  if (dim < 0) dim += rank;
  if (rank == 0 || dim < 0 || dim >= rank || (int64_t)out.shape.size() != rank || g_.value(index).shape != out.shape)
    unsupported(n, "the index must have the input's rank and the result's shape");
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && out.shape[d] > in_shape[d]) unsupported(n, "the index is larger than the input outside the gathered dimension");
  if (g_.value(index).dtype != "int64") unsupported(n, "the index must be int64");
  if (fused_.count(in)) materialize(in);  // read at other elements than the result's
  if (inlined_index(in)) materialize_index(in);
  const Layout& src = operand(in, n);
  Layout view{src.base, out.shape, src.strides, src.offset};
  view.strides[dim] = 0;
  // The index's group when it is an elementwise group over as many elements (after the input's
  // producer), else the latest such group after the index's and the input's producers (an
  // interpolation's reads join one group), else a new group.
  const bool inlined = inlined_index(index);
  int target = -1, latest_producer = producer_.at(src.base);
  if (auto it = fused_.find(index); it != fused_.end()) {
    const int gi = it->second.group;
    if (!is_row_group(gi) && groups_[gi].group.numel() == numel_of(out.shape) && gi > producer_.at(src.base)) target = gi;
    else materialize(index);
  }
  if (target < 0 && !inlined) latest_producer = std::max(latest_producer, producer_.at(memory_.at(index).base));
  if (target < 0) target = latest_group_over(numel_of(out.shape), latest_producer, [&](int) { return inlined ? 1 : 2; });
  if (target < 0) target = new_group("elementwise", out.shape);
  Step step{&n, next_var(), false, {}, {}};
  step.gather_stride = src.strides[dim];
  step.gather_extent = in_shape[dim];
  if (inlined) {
    auto aligned = broadcast_to(index_values_.at(index), out.shape);
    if (!aligned) unsupported(n, "the index does not have the result's shape");
    step.fused_operands[index] = index_expr(*aligned, "idx", step);
    step.gather_checked = !range_of(index).within(0, (double)in_shape[dim] - 1);
    groups_[target].reads_index = true;
  } else if (auto it = fused_.find(index); it != fused_.end() && it->second.group == target) {
    step.fused_operands[index] = it->second.var;
  } else {
    auto aligned = broadcast_to(operand(index, n, /*int64_ok=*/true), out.shape);
    if (!aligned) unsupported(n, "the index does not have the result's shape");
    step.loaded_operands[index] = *aligned;
  }
  step.loaded_operands[in] = view;
  fused_[n.name] = Fused{target, step.var, out.shape};
  add_step(target, n.name, n.op, std::move(step));
}

// Tensor operands of n that live in a group or in memory (constants are inlined instead).
std::vector<std::pair<size_t, std::string>> Planner::computed_operands(const Node& n) {
  std::vector<std::pair<size_t, std::string>> out;
  for (const auto& [pos, v] : tensor_operands(n))
    if (!constants_.count(v)) out.emplace_back(pos, v);
  return out;
}

void Planner::add_elementwise(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const auto operands = computed_operands(n);
  if (!operands.empty() && !is_half(out.dtype) &&
      std::all_of(operands.begin(), operands.end(), [&](const auto& o) { return index_values_.count(o.second) > 0; })) {
    derived_[n.name] = &n;  // computed from positions only: recomputed where it is read
    ranges_[n.name] = op_range(n, [&](size_t i, const char* kw) -> std::optional<Range> {
      const json& a = node_arg(n, i, kw);
      if (is_value_ref(a)) return range_of(value_ref(a));
      if (is_number(a)) return Range::point(number(a));
      return std::nullopt;
    }, out.dtype == "int64");
    index_values_[n.name] = Layout::contiguous(n.name, out.shape);
    return;
  }
  // A derived index value is computed inline where the op joins a fused operand's group (a GEMM's
  // epilogue, an interpolation's gathers) or no row op reads its result; else it is written first
  // and loaded, so that the op's group may still become a row group (row kernels have no idx), as
  // a masked softmax's where does.
  int fused_group = -1;
  std::vector<std::string> derived;  // read, not written
  for (const auto& [pos, v] : operands) {
    if (auto it = fused_.find(v); it != fused_.end()) fused_group = std::max(fused_group, it->second.group);
    if (inlined_index(v) && derived_.count(index_values_.at(v).base)) derived.push_back(v);
  }
  if (!derived.empty() && feeds_row_op(n.name) &&
      (fused_group < 0 || is_row_group(fused_group) || groups_[fused_group].group.numel() != numel_of(out.shape)))
    for (const std::string& v : derived) materialize_index(v);
  int target = -1, latest_producer = -1;
  bool reads_index = false, loads_int64 = false;
  for (const auto& [pos, v] : operands) {
    if (inlined_index(v)) {
      reads_index = true;  // inlined: in no group, read from no memory
    } else if (auto it = fused_.find(v); it != fused_.end()) {
      target = std::max(target, it->second.group);
      // Written out for a row group to load (a row group's own int64 indices are floats there).
      loads_int64 |= !is_row_group(it->second.group) && g_.value(v).dtype == "int64";
    } else {
      latest_producer = std::max(latest_producer, producer_.at(memory_.at(v).base));
      loads_int64 |= memory_dtype(memory_.at(v).base) == "int64";
    }
  }
  const bool int64 = out.dtype == "int64";
  // A kernel never reads memory that it writes itself: operands must come from earlier groups.
  if (target >= 0 && is_row_group(target)) {
    // Row groups load float32, half and bool values, and store float32 or half ones (a rounding
    // of the model's) per element or per row (and int64 indices per row).
    if (!int64 && !reads_index && !loads_int64 && target > latest_producer &&
        join_row(target, n, out, operands))
      return;
  }
  bool join = target >= 0 && !is_row_group(target) && target > latest_producer &&
              numel_of(out.shape) == groups_[target].group.numel() && has_room(target, new_loads(target, operands));
  if (!join) {  // the latest group over the same elements after every operand's (fused ones written by theirs)
    target = latest_group_over(numel_of(out.shape), std::max(latest_producer, target),
                               [&](int gi) { return new_loads(gi, operands); });
    join = target >= 0;
  }
  if (!join) target = new_group("elementwise", out.shape);
  Step step{&n, next_var(), false, {}, {}};
  step.int64 = int64;
  step.int_division = n.op.rfind("aten.div.", 0) == 0 &&
                      std::any_of(operands.begin(), operands.end(), [&](const auto& o) { return g_.value(o.second).dtype == "int64"; });
  resolve_operands(n, target, out.shape, operands, nullptr, step);
  fused_[n.name] = Fused{target, step.var, out.shape};
  add_step(target, n.name, n.op, std::move(step));
}

void Planner::resolve_operands(const Node& n, int gi, const std::vector<int64_t>& shape,
                               const std::vector<std::pair<size_t, std::string>>& operands, const RowInfo* per_row,
                               Step& step) {
  for (const auto& [pos, v] : tensor_operands(n))
    if (constants_.count(v)) step.fused_operands[v] = constants_.at(v);
  for (const auto& [pos, v] : operands) {
    if (inlined_index(v)) {
      FT_CHECK(per_row == nullptr && !is_row_group(gi), "an index value read in a row group");
      auto aligned = broadcast_to(index_values_.at(v), shape);
      if (!aligned) unsupported(n, "operand " + v + " does not broadcast to the result");
      step.fused_operands[v] = index_expr(*aligned, "idx", step);
      groups_[gi].reads_index = true;
      continue;
    }
    auto it = fused_.find(v);
    if (it != fused_.end() && it->second.group == gi) {
      step.fused_operands[v] = it->second.var;
      continue;
    }
    if (it != fused_.end()) materialize(v);
    // Half memory as it is: elementwise and GEMM epilogues load it converting, row kernels too
    // (and bool memory, per element or per row; add_elementwise keeps int64 out of row groups).
    auto aligned = broadcast_to(operand(v, n, /*int64_ok=*/true, /*half_ok=*/true), shape);
    if (aligned && per_row) aligned = row_to_domain(*per_row, *aligned);
    // A row group's result per element in another shape than the domain (join_row): the same
    // elements over the domain.
    if (aligned && !per_row && is_row_group(gi) && shape != groups_[gi].row.domain)
      aligned = reshape(*aligned, groups_[gi].row.domain);
    if (!aligned) unsupported(n, "operand " + v + " does not broadcast to the result");
    step.loaded_operands[v] = *aligned;
  }
}

// An anchor reads half operands as they are where a family of its group multiplies them on
// 16-bit tensor cores (Family::multiplies_half: the TMA GEMM; the fp32 template is the fallback
// the search also has), a float32 operand that the model holds in half and that was written just
// now stored in half for it (an MLP's activation between two half Linears); else (a product the
// TMA GEMM cannot read, a convolution) the half operands' float32 conversions, written before
// its group. Other half operands (a bias) are loaded by the epilogue, converting them.
void Planner::add_anchor(const Node& n, const ValueInfo& out, const Family& family) {
  check_result(n, out);
  std::set<std::string> written;  // operands written to memory for this anchor
  for (const auto& [pos, v] : tensor_operands(n)) {
    if (constants_.count(v) && !memory_.count(v)) materialize_constant(v);
    if (fused_.count(v)) {
      materialize(v);
      written.insert(v);
    }
  }
  int gi = plan_anchor(n, out, family);
  const std::vector<Layout> operands = groups_[gi].operands;
  auto half_operand = [&](const std::string& base) {
    return is_half(memory_dtype(base)) && std::any_of(operands.begin(), operands.end(), [&](const Layout& l) { return l.base == base; });
  };
  if (std::none_of(operands.begin(), operands.end(), [&](const Layout& l) { return half_operand(l.base); })) return;
  if (operands.size() == 2 && multiplies_half_operands(gi, n, family, written)) return;
  groups_.pop_back();
  fused_.erase(n.name);
  for (const auto& [pos, v] : tensor_operands(n))
    if (half_operand(memory_.at(v).base)) float_copy(v, n);
  plan_anchor(n, out, family);
}

// Whether a family of product group gi multiplies its half operands as they are (typed_values
// then keeps them in half), storing a float32 operand written just now in half for it where that
// makes both operands half.
bool Planner::multiplies_half_operands(int gi, const Node& n, const Family& family, const std::set<std::string>& written) {
  const Layout a = groups_[gi].operands[0], b = groups_[gi].operands[1];
  std::string da = memory_dtype(a.base), db = memory_dtype(b.base);
  const auto families = all_families();
  auto multiplied_half = [&](const std::string& dtype_a, const std::string& dtype_b) {
    Group operands = groups_[gi].group;
    operands.slots = {Slot{a, Access::Operand, dtype_a}, Slot{b, Access::Operand, dtype_b}};
    return std::any_of(families.begin(), families.end(), [&](const Family* f) {
      return f->group_family() == family.group_family() && f->multiplies_half(operands);
    });
  };
  // A float32 operand written just now is stored in the other's half dtype only where the
  // product then reads both as they are.
  if (!is_half(da) && written.count(a.base) && multiplied_half(db, db) && half_storable(a.base, n, db)) {
    store_half(a.base, db);
    da = db;
  } else if (!is_half(db) && written.count(b.base) && multiplied_half(da, da) && half_storable(b.base, n, da)) {
    store_half(b.base, da);
    db = da;
  }
  if (!multiplied_half(da, db)) return false;
  groups_[gi].typed_values[a.base] = da;
  groups_[gi].typed_values[b.base] = db;
  return true;
}

bool Planner::half_storable(const std::string& v, const Node& n, const std::string& dtype) const {
  const ValueInfo& info = g_.value(v);
  if (info.model_dtype != dtype || info.dtype != "float32" || kept_.count(v) || memory_.at(v).base != v ||
      is_row_group(producer_.at(v)))
    return false;
  // Every reader through views: n itself or an elementwise step (which loads half, converting).
  std::vector<std::string> values = {v};
  for (size_t i = 0; i < values.size(); ++i)
    for (const Node* reader : readers_of(values[i])) {
      const Node& r = *reader;
      if (&r == &n) continue;
      if (is_view_op(r.op) || (is_identity_op(r.op) && g_.value(r.name).dtype == "float32")) {
        values.push_back(r.name);
      } else if (!is_elementwise_op(r.op) || r.op == "aten.cat.default" || r.op == "aten.constant_pad_nd.default") {
        return false;
      }
    }
  return true;
}

// Value v, an output of its producer's group, stored as `dtype` (a half one, or float32 again).
void Planner::store_half(const std::string& v, const std::string& dtype) {
  for (GroupOutput& o : groups_[producer_.at(v)].group.outputs)
    if (o.value == v) o.dtype = dtype;
  if (dtype == "float32") stored_half_.erase(v);
  else stored_half_[v] = dtype;
}

// The anchor's group (the last one): its operands as they are in memory (half ones too).
int Planner::plan_anchor(const Node& n, const ValueInfo& out, const Family& family) {
  const int gi = new_group(family.group_family(), out.shape);
  Building& b = groups_[gi];
  Step step{&n, next_var(), true, {}, {}};
  auto layout_of = [&](const std::string& v) -> const Layout& { return operand(v, n, /*int64_ok=*/false, /*half_ok=*/true); };
  std::string why;
  if (!family.plan_anchor(n, out.shape, layout_of, b.group, b.operands, step.loaded_operands, why))
    unsupported(n, why);
  fused_[n.name] = Fused{gi, step.var, out.shape};
  add_step(gi, n.name, n.op, std::move(step));
  return gi;
}

void Planner::add_step(int gi, const std::string& value, const std::string& op, Step step) {
  for (const auto& [v, l] : step.loaded_operands)
    if (const std::string dtype = memory_dtype(l.base); dtype != "float32") groups_[gi].typed_values[l.base] = dtype;
  groups_[gi].group.nodes.push_back(value);
  groups_[gi].group.ops.push_back(op);
  groups_[gi].steps.push_back(std::move(step));
}

// getitem(t, 0) of max pooling (which returns values and indices) is the pooling itself.
void Planner::add_getitem(const Node& n, const ValueInfo& out) {
  const json& t = n.args.at(0);
  const auto it = is_value_ref(t) ? tuples_.find(value_ref(t)) : tuples_.end();
  if (it == tuples_.end()) unsupported(n, "getitem of this op is not lowered");
  if (it->second->op == "aten.split_with_sizes.default" || it->second->op == "aten.split.Tensor")
    return add_split_part(*it->second, n);
  if (!(is_number(n.args.at(1)) && number(n.args.at(1)) == 0))
    unsupported(*it->second, "the indices of max pooling are not lowered, only its values");
  add_pool(*it->second, n.name, out);
}

// Part k of split(x, sizes, dim) (getitem n) is x[..., start_k : start_k + sizes[k], ...] along dim:
// planned as that slice (a view where x is one), under getitem's name.
void Planner::add_split_part(const Node& split, const Node& n) {
  const json& in = split.args.at(0);
  const std::vector<int64_t>& shape = g_.value(value_ref(in)).shape;
  const json& jdim = node_arg(split, 2, "dim");
  int64_t dim = jdim.is_null() ? 0 : (int64_t)number(jdim);
  if (dim < 0) dim += (int64_t)shape.size();
  const json& k = n.args.at(1);
  if (!is_number(k) || dim < 0 || dim >= (int64_t)shape.size()) unsupported(split, "expected a part index and a dimension");
  std::vector<int64_t> sizes;
  if (split.op == "aten.split.Tensor") {  // parts of split_size, the last one shorter
    const int64_t size = (int64_t)number(split.args.at(1));
    if (size <= 0) unsupported(split, "the split size must be positive");
    for (int64_t at = 0; at < shape[dim]; at += size) sizes.push_back(std::min(size, shape[dim] - at));
  } else {
    sizes = split.args.at(1).get<std::vector<int64_t>>();
  }
  const int64_t part = (int64_t)number(k);
  if (part < 0 || part >= (int64_t)sizes.size()) unsupported(split, "part index out of range");
  int64_t start = 0;
  for (int64_t i = 0; i < part; ++i) start += sizes[i];
  synthetic_.push_back(Node{n.name, "aten.slice.Tensor", json::array({in, dim, start, start + sizes[part], 1}),
                            json::object(), n.source});
  visit(synthetic_.back());
}

// A pooling op (node n, producing `value`) is one value of an elementwise chain that reads its
// input's window from memory; the chain after it fuses as after any elementwise op.
void Planner::add_pool(const Node& n, const std::string& value, const ValueInfo& out) {
  check_float(value, &n);
  if (!is_value_ref(n.args.at(0)) || constants_.count(value_ref(n.args.at(0))))
    unsupported(n, "the input must be a computed tensor");
  const std::string v = value_ref(n.args.at(0));
  if (fused_.count(v)) materialize(v);
  const Layout& in = operand(v, n);
  std::string why;
  auto pool = pool_of(n, in.sizes, out.shape, why);
  if (!pool) unsupported(n, why);
  const int target = chain_group(out.shape, producer_.at(in.base), 1);
  Step step{&n, next_var(), false, {}, {{v, in}}};
  step.pool = std::move(*pool);
  fused_[value] = Fused{target, step.var, out.shape};
  add_step(target, value, n.op, std::move(step));
}

// A result stays in a register (bool for comparisons) or is a float32 tensor, an int64 one
// computed by the int64 ops, or a half one computed by an elementwise op (stored converted).
void Planner::check_result(const Node& n, const ValueInfo& out) {
  if (out.dtype == "bool") return;
  if (is_half(out.dtype) && is_elementwise_op(n.op)) return;  // computed in float32, stored as half
  check_float(n.name, &n, is_int64_op(n.op) || is_arg_reduction(n.op));
}

// Counted as the tensors it loads so far (a matrix product's two operands too), its values that a
// later op or the model's outputs still need (each may be written out), and the step's own.
bool Planner::has_room(int gi, int loads) const {
  const Building& b = groups_[gi];
  std::vector<Layout> loaded;
  for (const Step& s : b.steps)
    for (const auto& [v, l] : s.loaded_operands)
      if (std::find(loaded.begin(), loaded.end(), l) == loaded.end()) loaded.push_back(l);
  std::set<std::string> live;
  for (const auto* values : {&b.group.nodes, &b.fused_views})
    for (const std::string& v : *values)
      if (kept_.count(v) || (pending_users_.count(v) && pending_users_.at(v) > 0)) live.insert(v);
  for (const GroupOutput& o : b.group.outputs) live.insert(o.value);
  const int operands = b.group.family == "elementwise" || is_row_group(gi) ? 0 : 2;  // an anchor's A and B
  return operands + (int)loaded.size() + (int)live.size() + loads + 1 <= kMaxSlots;
}

int Planner::latest_group_over(int64_t numel, int after, const std::function<int(int)>& loads) const {
  for (int gi = (int)groups_.size() - 1; gi > after; --gi)
    if (!is_row_group(gi) && groups_[gi].group.numel() == numel && planner_family(groups_[gi].group.family).takes_epilogue() &&
        has_room(gi, loads(gi)))
      return gi;
  return -1;
}

bool Planner::inlined_index(const std::string& v) const { return index_values_.count(v) && !memory_.count(v); }

// Operands of node n that a step in group gi would load anew: not in its registers (nor inlined),
// nor read by another of its steps already.
int Planner::new_loads(int gi, const std::vector<std::pair<size_t, std::string>>& operands) const {
  std::set<std::string> loaded;  // each view is a slot of its own (a transpose of x beside x too)
  for (const Step& s : groups_[gi].steps)
    for (const auto& [v, l] : s.loaded_operands) loaded.insert(v);
  int loads = 0;
  for (const auto& [pos, v] : operands)
    if (!inlined_index(v) && !(fused_.count(v) && fused_.at(v).group == gi) && !loaded.count(v)) ++loads;
  return loads;
}

int Planner::chain_group(const std::vector<int64_t>& shape, int after, int loads) {
  for (int gi = (int)groups_.size() - 1; gi > after; --gi)
    if (!is_row_group(gi) && groups_[gi].group.family == "elementwise" && groups_[gi].group.numel() == numel_of(shape) &&
        has_room(gi, loads))
      return gi;
  return new_group("elementwise", shape);
}

int Planner::new_group(const std::string& family, const std::vector<int64_t>& shape) {
  Building b;
  b.group.id = "g" + std::to_string(groups_.size());
  b.group.family = family;
  b.group.index_shape = shape;
  groups_.push_back(std::move(b));
  return (int)groups_.size() - 1;
}

// Output `name` of fused value `value`'s group, holding that value's elements.
GroupOutput Planner::fused_output(const std::string& value, const std::string& name) {
  const Fused& f = fused_.at(value);
  check_float(value, nullptr, /*int64_ok=*/true);  // int64 and half values exist only in elementwise steps
  // A comparison's result (bool) is written as float 0 / 1, as the kernels hold it.
  const std::string dtype = g_.value(value).dtype == "bool" ? "float32" : g_.value(value).dtype;
  return GroupOutput{name, f.var, f.shape, dtype};
}

// Makes a fused value an output of its group so that later groups read it from memory.
void Planner::materialize(const std::string& value) {
  if (memory_.count(value)) return;
  const Fused& f = fused_.at(value);
  groups_[f.group].group.outputs.push_back(fused_output(value, value));
  memory_[value] = Layout::contiguous(value, f.shape);
  producer_[value] = f.group;
  // A row statistic stays in its group's registers too: a later per-row step of that group (a
  // BatchNorm's running mean from the mean that the normalisation reads) computes from it there.
  if (!is_row_group(f.group) || f.level != Level::Reduced) fused_.erase(value);
}

bool Planner::materialize_flipped(const Node& n, const std::string& v) {
  const Fused& f = fused_.at(v);
  if (!is_row_group(f.group) || f.level != Level::Full || f.shape != groups_[f.group].row.domain) return false;
  const auto flipped = apply_view(n, Layout::contiguous(n.name, f.shape), f.shape);
  FT_CHECK(flipped.has_value(), "a flip without strides");
  GroupOutput out = fused_output(v, n.name);
  out.written_as = *flipped;
  groups_[f.group].group.outputs.push_back(out);
  memory_[v] = *flipped;
  producer_[n.name] = producer_[v] = f.group;
  fused_.erase(v);
  return true;
}

// An attention group's value read through a permutation of its dimensions (the heads merged
// back: [batch, heads, seq, D] to [batch, seq, heads, D]): the kernel writes it in the permuted
// order, where the permutation reads it contiguous, instead of a copy after it.
bool Planner::materialize_permuted(const Node& n, const std::string& v, const std::vector<int64_t>& shape) {
  const Fused& f = fused_.at(v);
  const Group& g = groups_[f.group].group;
  const bool permutes = n.op == "aten.permute.default" || n.op == "aten.transpose.int" || n.op == "aten.t.default";
  if (!permutes || g.family != "attention" || f.shape != g.index_shape || g_.value(v).dtype != "float32") return false;
  // The permutation, read off a layout whose strides number the dimensions.
  const size_t rank = f.shape.size();
  Layout probe{"", f.shape, std::vector<int64_t>(rank), 0};
  for (size_t d = 0; d < rank; ++d) probe.strides[d] = (int64_t)d + 1;
  const auto permuted = apply_view(n, probe, shape);
  FT_CHECK(permuted.has_value(), "a permutation without strides");
  const Layout target = Layout::contiguous(n.name, shape);
  Layout written{n.name, f.shape, std::vector<int64_t>(rank), 0};
  for (size_t i = 0; i < rank; ++i) written.strides[permuted->strides[i] - 1] = target.strides[i];
  GroupOutput out = fused_output(v, n.name);
  out.shape = shape;
  out.written_as = written;
  groups_[f.group].group.outputs.push_back(out);
  memory_[v] = written;
  producer_[n.name] = producer_[v] = f.group;
  fused_.erase(v);
  return true;
}

// Value `value`, held in memory as the strided layout `src` that a view cannot reinterpret (or
// that an output must not be), gets copied contiguous by an elementwise group. The copy takes the
// value's name: it holds exactly that value's data, so PyTorch's reference for it is the graph's.
Layout Planner::copy_to_memory(const Layout& src, const Node& n, const std::string& value) {
  FT_CHECK(src.base != value && src.sizes == g_.value(value).shape, "a copy of " + value + " that is not its layout");
  return copy_to_memory(src, n, value, src.sizes);
}

// A copy group over src's index space writing `name` contiguous with `shape` (same element count
// and linear order).
Layout Planner::copy_to_memory(const Layout& src, const Node& n, const std::string& name, const std::vector<int64_t>& shape) {
  const int gi = new_group("elementwise", src.sizes);
  Step step{&n, next_var(), false, {}, {{src.base, src}}};
  step.node = nullptr;  // an identity step: the variable is the loaded operand
  const bool int64 = memory_dtype(src.base) == "int64";
  step.int64 = int64;
  const std::string var = step.var;
  add_step(gi, name, "copy", std::move(step));
  // A bool as 0 / 1, a half value's copy as a float32 value (its conversion) or as half.
  const std::string dtype = int64 ? "int64" : is_half(g_.value(name).dtype) ? g_.value(name).dtype : "float32";
  groups_[gi].group.outputs.push_back(GroupOutput{name, var, shape, dtype});
  memory_[name] = Layout::contiguous(name, shape);
  producer_[name] = gi;
  return memory_[name];
}

// repeat(x, reps) is a copy: out dimension d, of reps[d] x size[d] elements, is read as the pair
// (reps[d] with stride 0, size[d] with x's stride), so that one copy group writes it in order.
void Planner::add_repeat(const Node& n, const ValueInfo& out) {
  check_result(n, out);
  const std::string in = value_ref(n.args.at(0));
  if (constants_.count(in)) unsupported(n, "repeat of a constant is not lowered");
  if (fused_.count(in)) materialize(in);
  const Layout& src = memory_.at(in);
  const auto reps = n.args.at(1).get<std::vector<int64_t>>();
  if (reps.size() < src.sizes.size()) unsupported(n, "fewer repeats than dimensions");
  const size_t pad = reps.size() - src.sizes.size();
  Layout expanded{src.base, {}, {}, src.offset};
  for (size_t d = 0; d < reps.size(); ++d) {
    const int64_t size = d < pad ? 1 : src.sizes[d - pad], stride = d < pad ? 0 : src.strides[d - pad];
    if (reps[d] != 1) {
      expanded.sizes.push_back(reps[d]);
      expanded.strides.push_back(0);
    }
    expanded.sizes.push_back(size);
    expanded.strides.push_back(stride);
  }
  copy_to_memory(expanded, n, n.name, out.shape);
}

std::string Planner::materialize_output(const std::string& value) {
  if (constants_.count(value)) FT_USER_ERROR("the model returns a constant tensor (" + value + "); that is not lowered");
  if (g_.value(value).dtype == "bool") FT_USER_ERROR("the model returns a bool tensor (" + value + "); that is not lowered");
  if (cats_.count(value)) realize_cat(value);
  if (fused_.count(value)) materialize(value);
  if (inlined_index(value)) materialize_index(value);
  const Layout& l = memory_.at(value);
  const ValueInfo& base = g_.value(l.base);
  if (l.is_contiguous() && l.sizes == base.shape) return l.base;
  const Node fake{value, "copy", json::array(), json::object(), ""};
  return copy_to_memory(l, fake, value).base;
}

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
  for (const auto& v : input_values()) {
    std::string dtype = "float32";
    for (const Slot& s : slots)
      if (s.access != Access::Output && s.layout.base == v) dtype = s.dtype;
    bytes += dtype_bytes(dtype) * value_numel.at(v);
  }
  for (const auto& o : outputs) bytes += dtype_bytes(o.dtype) * numel_of(o.shape);
  return bytes;
}

json ConvParams::to_json() const {
  return json{{"transposed", transposed}, {"groups", groups}, {"stride", stride}, {"padding", padding},
              {"dilation", dilation}, {"output_padding", output_padding}};
}

ConvParams ConvParams::from_json(const json& j) {
  ConvParams c;
  c.transposed = j.at("transposed").get<bool>();
  c.groups = j.at("groups").get<int64_t>();
  c.stride = j.at("stride").get<std::vector<int64_t>>();
  c.padding = j.at("padding").get<std::vector<int64_t>>();
  c.dilation = j.at("dilation").get<std::vector<int64_t>>();
  c.output_padding = j.at("output_padding").get<std::vector<int64_t>>();
  return c;
}

json AttentionParams::to_json() const { return json{{"causal", causal}, {"scale", scale}}; }

AttentionParams AttentionParams::from_json(const json& j) {
  return AttentionParams{j.at("causal").get<bool>(), j.at("scale").get<double>()};
}

json Group::to_json() const {
  json j;
  j["id"] = id;
  j["family"] = family;
  j["nodes"] = nodes;
  j["ops"] = ops;
  j["index_shape"] = index_shape;
  if (family == "gemm") j["gemm"] = {{"m", m}, {"n", n}, {"k", k}, {"batch", batch}, {"bias_slot", bias_slot}};
  if (family == "attention") {
    j["attention"] = attention.to_json();
    j["attention"].update({{"m", m}, {"n", n}, {"k", k}, {"batch", batch}});
  }
  if (family == "conv") j["conv"] = conv.to_json();
  if (family == "reduce")
    j["reduce"] = {{"outputs", m}, {"reduced", k}, {"stats", stats}, {"passes", passes}, {"full_outputs", full_outputs},
                    {"scans", scans}, {"varying_inputs", varying_inputs}, {"row_vector", row_vector}};
  j["slots"] = json::array();
  for (const Slot& s : slots) {
    j["slots"].push_back(json{{"value", s.layout.base}, {"access", access_name(s.access)}, {"sizes", s.layout.sizes},
                              {"strides", s.layout.strides}, {"offset", s.layout.offset}, {"dtype", s.dtype}});
    if (s.range) j["slots"].back()["range"] = {{"begin", s.range->begin}, {"end", s.range->end}, {"fill", s.range->fill}};
  }
  j["inputs"] = input_values();
  j["outputs"] = json::array();
  for (const auto& o : outputs) j["outputs"].push_back(json{{"value", o.value}, {"shape", o.shape}, {"dtype", o.dtype}});
  if (!same_as.empty()) j["same_as"] = same_as;
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
  if (j.contains("conv")) g.conv = ConvParams::from_json(j.at("conv"));
  if (j.contains("attention")) {
    const json& a = j.at("attention");
    g.attention = AttentionParams::from_json(a);
    g.m = a.at("m"); g.n = a.at("n"); g.k = a.at("k"); g.batch = a.at("batch");
  }
  if (j.contains("reduce")) {
    const json& r = j.at("reduce");
    g.m = r.at("outputs");
    g.k = r.at("reduced");
    g.stats = r.value("stats", 0);
    g.passes = r.value("passes", 0);
    g.full_outputs = r.value("full_outputs", 0);
    g.scans = r.value("scans", 0);
    g.varying_inputs = r.value("varying_inputs", 0);
    g.row_vector = r.value("row_vector", 1);
  }
  for (const json& s : j.at("slots")) {
    const std::string access = s.at("access").get<std::string>();
    Access a = access == "operand" ? Access::Operand : access == "full" ? Access::Full
             : access == "strided" ? Access::Strided : Access::Output;
    g.slots.push_back(Slot{Layout{s.at("value").get<std::string>(), s.at("sizes").get<std::vector<int64_t>>(),
                                  s.at("strides").get<std::vector<int64_t>>(), s.at("offset").get<int64_t>()},
                           a, s.value("dtype", "float32")});
    if (s.contains("range")) {
      const json& r = s.at("range");
      g.slots.back().range = SlotRange{r.at("begin").get<int64_t>(), r.at("end").get<int64_t>(), r.at("fill").get<std::string>()};
    }
  }
  for (const json& o : j.at("outputs"))
    g.outputs.push_back(GroupOutput{o.at("value").get<std::string>(), "", o.at("shape").get<std::vector<int64_t>>(),
                                    o.value("dtype", "float32")});
  g.same_as = j.value("same_as", "");
  return g;
}

int64_t dtype_bytes(const std::string& dtype) {
  return dtype == "int64" ? 8 : dtype == "bool" ? 1 : is_half(dtype) ? 2 : 4;
}

json Plan::to_json() const {
  json j;
  j["groups"] = json::array();
  for (const auto& g : groups) j["groups"].push_back(g.to_json());
  j["outputs"] = outputs;
  j["mutations"] = json::array();
  for (const Mutation& m : mutations) j["mutations"].push_back(json{{"value", m.value}, {"kind", m.kind}, {"target", m.target}});
  return j;
}

Plan plan_graph(const Graph& g) { return Planner(g).run(); }

}  // namespace fusetune
