// Code generation for elementwise and matrix-product groups: the tensor slots each template
// reads and writes, and the generated Op struct that computes the group's chain per element.
#include <algorithm>
#include <cmath>

#include "error.h"
#include "families.h"
#include "fusetune_args.h"
#include "ops.h"
#include "plan_build.h"

namespace fusetune {

namespace {

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

// The statement storing variable var into element idx of slot s, an output of a dtype the
// templates do not store (those store float32 outputs).
std::string typed_store(int s, const std::string& dtype, const std::string& var) {
  const std::string slot = "a.ptr[" + std::to_string(s) + "]";
  if (dtype == "int64") return "reinterpret_cast<long long*>(" + slot + ")[idx] = " + var + ";";
  FT_CHECK(is_half(dtype), "no store for a " + dtype + " output");
  return "reinterpret_cast<unsigned short*>(" + slot + ")[idx] = fusetune::float_to_" + half_suffix(dtype) + "(" + var + ");";
}

}  // namespace

std::string typed_load(const std::string& slot, const std::string& dtype, const std::string& at) {
  if (dtype == "int64") return "reinterpret_cast<const long long*>(" + slot + ")" + at;
  if (dtype == "bool") return "(float)reinterpret_cast<const unsigned char*>(" + slot + ")" + at;  // 0 / 1, as comparisons give
  if (dtype == "float16") return "fusetune::f16_to_float(reinterpret_cast<const unsigned short*>(" + slot + ")" + at + ")";
  if (dtype == "bfloat16") return "fusetune::bf16_to_float(reinterpret_cast<const unsigned short*>(" + slot + ")" + at + ")";
  return slot + at;
}

Group finalize_group(Building& b) {
  Group& gr = b.group;
  const bool anchored = gr.family != "elementwise";
  if (anchored) {  // a matrix product's operands may be half (Planner::add_anchor)
    for (const Layout& l : b.operands) gr.slots.push_back(Slot{l, Access::Operand, b.dtype_of(l.base)});
  }
  auto slot_of = [&](const Layout& l, Access access) {
    for (size_t i = 0; i < gr.slots.size(); ++i)
      if (gr.slots[i].access == access && gr.slots[i].layout == l) return (int)i;
    gr.slots.push_back(Slot{l, access, b.dtype_of(l.base)});
    return (int)gr.slots.size() - 1;
  };
  const int64_t numel = gr.numel();
  gr.full_slot = (int)gr.slots.size();
  // A pooled input is read through its own view (its windows), never as a Full slot; nor is an
  // int64 or bool input. Half ones are (every template loads them as halves: Op::kFullHalf).
  auto full = [&](const Step& s, const Layout& l) {
    const bool typed = b.typed_values.count(l.base) && !is_half(b.dtype_of(l.base));
    return !s.pool && s.cat.empty() && s.pad_inside.empty() && l.is_contiguous() && l.numel() == numel && !typed;
  };
  for (const Step& s : b.steps)
    for (const auto& [v, l] : s.loaded_operands)
      if (full(s, l)) slot_of(l, Access::Full);
  gr.n_full = (int)gr.slots.size() - gr.full_slot;
  for (const Step& s : b.steps)
    for (const auto& [v, l] : s.loaded_operands)
      if (!full(s, l)) slot_of(l, Access::Strided);
  // float32 outputs first: the templates store those (kOut of them); Op::apply stores the others,
  // the half ones (kHalfOut) before the int64 ones.
  const auto halves = std::stable_partition(gr.outputs.begin(), gr.outputs.end(),
                                            [](const GroupOutput& o) { return o.dtype == "float32"; });
  std::stable_partition(halves, gr.outputs.end(), [](const GroupOutput& o) { return is_half(o.dtype); });
  gr.out_slot = (int)gr.slots.size();
  for (const GroupOutput& o : gr.outputs)
    gr.slots.push_back(Slot{o.written_as ? *o.written_as : Layout::contiguous(o.value, o.shape), Access::Output, o.dtype});
  if ((int)gr.slots.size() > kMaxSlots)
    FT_USER_ERROR("group " + gr.id + " (" + gr.nodes.front() + ") needs " + std::to_string(gr.slots.size()) +
                  " tensors; a kernel takes at most " + std::to_string(kMaxSlots));

  const int anchor_inputs = anchored ? 1 : 0;
  auto load_expr = [&](const Layout& l) {
    for (int i = gr.full_slot; i < gr.full_slot + gr.n_full; ++i)
      if (gr.slots[i].layout == l) return "x[" + std::to_string(anchor_inputs + i - gr.full_slot) + "]";
    const int s = slot_of(l, Access::Strided);
    return typed_load("a.ptr[" + std::to_string(s) + "]", b.dtype_of(l.base), "[" + offset_expr(l, "idx") + "]");
  };
  // A cat's part or a pad's input: the strided view over the result, `shift` elements back.
  auto shifted_load = [&](const Layout& l, int64_t shift) {
    return "a.ptr[" + std::to_string(slot_of(l, Access::Strided)) + "][" + offset_expr(l, "idx") + " - " +
           std::to_string(shift) + "LL]";
  };
  std::string body;
  for (const Step& s : b.steps) {
    std::string expr;
    body += s.index_lines;
    if (!s.index_expr.empty()) {
      expr = s.index_expr;
    } else if (!s.cat.empty()) {  // the part the coordinate along cat_dim falls in, loaded there only
      const std::string at = s.var + "_at";
      body += "    const long long " + at + " = " + s.cat_at + ";\n";
      for (size_t k = s.cat.size(); k-- > 0;) {
        const Step::CatPart& part = s.cat[k];
        std::string value;
        if (auto it = s.fused_operands.find(part.operand); it != s.fused_operands.end()) {
          value = it->second;
        } else {
          value = shifted_load(s.loaded_operands.at(part.operand), part.shift);
        }
        expr = expr.empty() ? value : "(" + at + " < " + std::to_string(part.end) + "LL ? " + value + " : " + expr + ")";
      }
    } else if (!s.pad_inside.empty()) {  // the input where the coordinates fall inside it
      expr = "(" + s.pad_inside + " ? " + shifted_load(s.loaded_operands.begin()->second, s.pad_shift) + " : " +
             s.pad_value + ")";
    } else if (!s.node) {
      expr = load_expr(s.loaded_operands.begin()->second);
    } else if (s.pool) {
      const Layout& input = s.loaded_operands.begin()->second;
      expr = pool_expr(*s.pool, slot_of(input, Access::Strided), input);
    } else {
      const Node& n = *s.node;
      ArgExpr arg = [&](size_t i, const char* kw) -> std::string {
        const json& a = node_arg(n, i, kw);
        if (is_value_ref(a)) {
          const std::string v = value_ref(a);
          const auto it = s.fused_operands.find(v);
          const std::string e = it != s.fused_operands.end() ? it->second : load_expr(s.loaded_operands.at(v));
          return s.int_division ? "(float)" + e : e;
        }
        if (is_number(a)) return number_literal(number(a), s.int64);
        if (a.is_string()) return a.get<std::string>();
        return "";
      };
      if (s.gather_extent > 0) {  // the input through its view, plus index * stride along the gathered dimension
        const Layout& view = s.loaded_operands.at(value_ref(n.args.at(0)));
        const std::string at = s.var + "_at";
        body += "    const long long " + at + " = " + arg(2, "index") + ";\n";
        if (s.gather_checked)
          body += "    if ((unsigned long long)" + at + " >= " + std::to_string(s.gather_extent) +
                  "ULL) __trap();  // out of range: torch raises\n";
        // In ints where every offset it can read fits (the index is in range by now): a load's
        // address is then one multiply-add.
        const bool ints = offset_span(view) + (s.gather_extent - 1) * std::llabs(s.gather_stride) <= 2147483647LL;
        expr = "a.ptr[" + std::to_string(slot_of(view, Access::Strided)) + "][" +
               (ints ? int_offset_expr(view, "idx") + " + (int)" + at + " * " + std::to_string(s.gather_stride)
                     : offset_expr(view, "idx") + " + " + at + " * " + std::to_string(s.gather_stride) + "LL") +
               "]";
      } else {
        expr = s.anchor ? planner_family(gr.family).anchor_expr(n, arg) : elementwise_expr(n, arg, s.int64 ? Arith::Int64 : Arith::Float);
      }
      if (s.anchor) {
        const Layout* bias = per_column_bias(n, s.loaded_operands);
        // A library adds a bias of its operands' dtype (float32, or the half type of both).
        const std::string bias_dtype = bias ? b.dtype_of(bias->base) : "";
        if (bias && bias_dtype == gr.slots[0].dtype && gr.slots[1].dtype == bias_dtype &&
            (bias_dtype == "float32" || is_half(bias_dtype))) {
          gr.bias_slot = slot_of(*bias, Access::Strided);
          expr = "(kBiasInProduct ? x[0] : " + expr + ")";
        }
      }
    }
    body += std::string("    const ") + (s.int64 ? "long long " : "float ") + s.var + " = " + expr + ";\n";
  }
  int float_outputs = 0, half_outputs = 0;
  unsigned half_bf16 = 0;  // bit h: half output h is bfloat16 (else float16)
  for (size_t o = 0; o < gr.outputs.size(); ++o) {
    const GroupOutput& out = gr.outputs[o];
    if (out.dtype == "float32") {
      body += "    y[" + std::to_string(float_outputs++) + "] = " + out.var + ";\n";
    } else if (is_half(out.dtype)) {  // into y where the caller stores them (kHalfInY), else here
      if (out.dtype == "bfloat16") half_bf16 |= 1u << half_outputs;
      body += "    if constexpr (kHalfInY) y[kOut + " + std::to_string(half_outputs++) + "] = " + out.var + ";\n" +
              "    else " + typed_store(gr.out_slot + (int)o, out.dtype, out.var) + "\n";
    } else {  // contiguous over the index space, like every output
      body += "    " + typed_store(gr.out_slot + (int)o, out.dtype, out.var) + "\n";
    }
  }
  const int n_in = std::max(1, anchor_inputs + gr.n_full);
  const bool pools = std::any_of(b.steps.begin(), b.steps.end(), [](const Step& s) { return s.pool.has_value(); });
  // half.cuh where a half tensor is loaded or stored, or a value rounded to half (a cast's result).
  bool half = std::any_of(gr.slots.begin(), gr.slots.end(), [](const Slot& s) { return is_half(s.dtype); });
  for (const Step& s : b.steps)
    half = half || (s.node && s.node->op == "aten._to_copy.default" && s.node->kwargs.contains("dtype") &&
                    is_half(s.node->kwargs.at("dtype").value("dtype", "")));
  // Half outputs follow the float ones (slots kOutSlot + kOut + h). Templates that store them as
  // vectors (elementwise.cuh, gemm_tma.cuh) have apply leave them in y[kOut + h] (kHalfInY).
  unsigned full_half = 0;  // 2 bits per full input: 0 float32, 1 float16, 2 bfloat16
  for (int i = 0; i < gr.n_full; ++i) full_half |= (unsigned)half_kind(gr.slots[gr.full_slot + i].dtype) << 2 * i;
  const std::string half_members =
      (full_half ? "  static constexpr unsigned kFullHalf = " + std::to_string(full_half) +
                       "u;  // 2 bits per full input: 1 float16, 2 bfloat16, else float32\n"
                 : std::string()) +
      (half_outputs ? "  static constexpr int kHalfOut = " + std::to_string(half_outputs) + ";\n" +
                         "  static constexpr unsigned kHalfOutBf16 = " + std::to_string(half_bf16) +
                         "u;  // bit h: half output h is bfloat16, else float16\n"
                   : "");
  gr.op_struct = std::string(pools ? "#include \"pool.cuh\"\n\n" : "") + (half ? "#include \"half.cuh\"\n\n" : "") + "namespace fusetune_gen {\nstruct " + gr.id + "_op {\n" +
                 "  static constexpr int kFullSlot = " + std::to_string(gr.full_slot) + ";\n" +
                 "  static constexpr int kFull = " + std::to_string(gr.n_full) + ";\n" +
                 "  static constexpr int kOutSlot = " + std::to_string(gr.out_slot) + ";\n" +
                 "  static constexpr int kOut = " + std::to_string(float_outputs) + ";\n" +
                 "  static constexpr int kIn = " + std::to_string(n_in) + ";\n" + half_members +
                 "  template <int MATH, bool kBiasInProduct = false" + (half_outputs ? ", bool kHalfInY = false" : "") + ">\n" +
                 "  __device__ __forceinline__ static void apply(const fusetune::KernelArgs& a, long long idx,\n" +
                 "                                               const float* x, float* y) {\n" +
                 "    (void)a; (void)idx; (void)x;\n" + body + "  }\n};\n}  // namespace fusetune_gen\n";
  return gr;
}


}  // namespace fusetune
