// Elementwise op table: ATen op name -> fp32 CUDA expression over its arguments. Comparison ops
// produce 0/1 floats, consumed by where(). The same expressions over long long operands and
// integer literals compute the int64 ops (is_int64_op) exactly.
#include "ops.h"

#include <cmath>
#include <map>
#include <set>

#include "error.h"
#include "util.h"

namespace fusetune {

namespace {

using Emit = std::function<std::string(const ArgExpr&)>;

std::string req(const ArgExpr& a, size_t i, const char* kw) {
  std::string e = a(i, kw);
  if (e.empty()) FT_THROW(std::string("missing argument ") + std::to_string(i));
  return e;
}

std::string opt(const ArgExpr& a, size_t i, const char* kw, const std::string& dflt) {
  std::string e = a(i, kw);
  return e.empty() ? dflt : e;
}

Emit unary(const std::string& fn) {
  return [fn](const ArgExpr& a) { return fn + "(" + req(a, 0, "self") + ")"; };
}

Emit binary_infix(const std::string& opr) {
  return [opr](const ArgExpr& a) { return "(" + req(a, 0, "self") + " " + opr + " " + req(a, 1, "other") + ")"; };
}

Emit compare(const std::string& opr) {
  return [opr](const ArgExpr& a) {
    return "(float)(" + req(a, 0, "self") + " " + opr + " " + req(a, 1, "other") + ")";
  };
}

// and, or, xor of the operands' truth (non-zero), as 0 / 1.
Emit logical(const std::string& opr) {
  return [opr](const ArgExpr& a) {
    return "(float)((" + req(a, 0, "self") + " != 0.f) " + opr + " (" + req(a, 1, "other") + " != 0.f))";
  };
}

// not of the operand's truth, as 0 / 1.
Emit logical_not() {
  return [](const ArgExpr& a) { return "(float)(" + req(a, 0, "self") + " == 0.f)"; };
}

// fmod (the sign of the dividend, as C's) and remainder (the sign of the divisor, as Python's),
// PyTorch's way: remainder is fmod plus the divisor where their signs differ.
Emit fmod(bool int64) {
  return [int64](const ArgExpr& a) {
    const std::string x = req(a, 0, "self"), y = req(a, 1, "other");
    return int64 ? "(" + x + " % " + y + ")" : "fmodf(" + x + ", " + y + ")";
  };
}

Emit remainder(bool int64) {
  return [int64](const ArgExpr& a) {
    const std::string y = req(a, 1, "other"), mod = fmod(int64)(a), zero = int64 ? "0LL" : "0.f";
    return "((" + mod + " != " + zero + " && (" + y + " < " + zero + ") != (" + mod + " < " + zero + ")) ? " + mod + " + " +
           y + " : " + mod + ")";
  };
}

// clamp(self, min, max) with either bound a number or a tensor, or absent.
Emit clamp() {
  return [](const ArgExpr& a) {
    std::string e = req(a, 0, "self");
    const std::string lo = a(1, "min"), hi = a(2, "max");
    if (!lo.empty()) e = "fusetune::clamp_min(" + e + ", " + lo + ")";
    if (!hi.empty()) e = "fusetune::clamp_max(" + e + ", " + hi + ")";
    return e;
  };
}

// add/sub with alpha: self +/- alpha * other.
Emit add_like(const std::string& opr) {
  return [opr](const ArgExpr& a) {
    const std::string alpha = a(2, "alpha");
    const std::string other = req(a, 1, "other");
    return "(" + req(a, 0, "self") + " " + opr + " " + (alpha.empty() ? other : alpha + " * " + other) + ")";
  };
}

const std::map<std::string, Emit>& table() {
  static const std::map<std::string, Emit> t = {
      {"aten.relu.default", unary("fusetune::relu")},
      {"aten.sigmoid.default", unary("fusetune::sigmoid<MATH>")},
      {"aten.tanh.default", unary("fusetune::tanh_<MATH>")},
      {"aten.exp.default", unary("fusetune::exp_<MATH>")},
      {"aten.exp2.default", unary("exp2f")},
      {"aten.expm1.default", unary("expm1f")},
      {"aten.log.default", unary("fusetune::log_<MATH>")},
      {"aten.log2.default", unary("log2f")},
      {"aten.log10.default", unary("log10f")},
      {"aten.log1p.default", unary("log1pf")},
      {"aten.neg.default", unary("-")},
      {"aten.abs.default", unary("fabsf")},
      {"aten.sqrt.default", unary("sqrtf")},
      {"aten.rsqrt.default", unary("rsqrtf")},
      {"aten.reciprocal.default", unary("1.f / ")},
      {"aten.erf.default", unary("erff")},
      {"aten._to_copy.default", unary("(float)")},  // to float32 from int64 (float32 copies are views; to half: below)
      {"aten.sin.default", unary("fusetune::sin_<MATH>")},
      {"aten.cos.default", unary("fusetune::cos_<MATH>")},
      {"aten.tan.default", unary("tanf")},
      {"aten.atan.default", unary("atanf")},
      {"aten.sinh.default", unary("sinhf")},
      {"aten.cosh.default", unary("coshf")},
      {"aten.floor.default", unary("floorf")},
      {"aten.ceil.default", unary("ceilf")},
      {"aten.round.default", unary("rintf")},
      {"aten.trunc.default", unary("truncf")},
      {"aten.sign.default", unary("fusetune::sign")},
      {"aten.silu.default", [](const ArgExpr& a) { const auto x = req(a, 0, "self"); return "(" + x + " * fusetune::sigmoid<MATH>(" + x + "))"; }},
      {"aten.gelu.default",
       [](const ArgExpr& a) {
         const std::string approx = a(1, "approximate");
         return std::string(approx == "tanh" ? "fusetune::gelu_tanh<MATH>(" : "fusetune::gelu_erf(") + req(a, 0, "self") + ")";
       }},
      {"aten.elu.default",
       [](const ArgExpr& a) {
         return "fusetune::elu(" + req(a, 0, "self") + ", " + opt(a, 1, "alpha", "1.f") + ", " + opt(a, 2, "scale", "1.f") +
                ", " + opt(a, 3, "input_scale", "1.f") + ")";
       }},
      {"aten.leaky_relu.default",
       [](const ArgExpr& a) { return "fusetune::leaky_relu(" + req(a, 0, "self") + ", " + opt(a, 1, "negative_slope", "0.01f") + ")"; }},
      {"aten.hardtanh.default",
       [](const ArgExpr& a) {
         return "fusetune::clamp_max(fusetune::clamp_min(" + req(a, 0, "self") + ", " + opt(a, 1, "min_val", "-1.f") + "), " +
                opt(a, 2, "max_val", "1.f") + ")";
       }},
      {"aten.clamp.default", clamp()},
      {"aten.clamp.Tensor", clamp()},
      {"aten.clamp_min.default", [](const ArgExpr& a) { return "fusetune::clamp_min(" + req(a, 0, "self") + ", " + req(a, 1, "min") + ")"; }},
      {"aten.clamp_max.default", [](const ArgExpr& a) { return "fusetune::clamp_max(" + req(a, 0, "self") + ", " + req(a, 1, "max") + ")"; }},
      {"aten.pow.Tensor_Scalar", [](const ArgExpr& a) { return "fusetune::pow_(" + req(a, 0, "self") + ", " + req(a, 1, "exponent") + ")"; }},
      {"aten.pow.Tensor_Tensor", [](const ArgExpr& a) { return "powf(" + req(a, 0, "self") + ", " + req(a, 1, "exponent") + ")"; }},
      {"aten.pow.Scalar", [](const ArgExpr& a) { return "powf(" + req(a, 0, "self") + ", " + req(a, 1, "exponent") + ")"; }},
      {"aten.add.Tensor", add_like("+")},
      {"aten.add.Scalar", add_like("+")},
      {"aten.sub.Tensor", add_like("-")},
      {"aten.sub.Scalar", add_like("-")},
      {"aten.rsub.Scalar",
       [](const ArgExpr& a) {
         const std::string alpha = a(2, "alpha"), self = req(a, 0, "self");
         return "(" + req(a, 1, "other") + " - " + (alpha.empty() ? self : alpha + " * " + self) + ")";
       }},
      {"aten.mul.Tensor", binary_infix("*")},
      {"aten.mul.Scalar", binary_infix("*")},
      {"aten.div.Tensor", binary_infix("/")},
      {"aten.div.Scalar", binary_infix("/")},
      {"aten.maximum.default", [](const ArgExpr& a) { return "fusetune::maximum(" + req(a, 0, "self") + ", " + req(a, 1, "other") + ")"; }},
      {"aten.minimum.default", [](const ArgExpr& a) { return "fusetune::minimum(" + req(a, 0, "self") + ", " + req(a, 1, "other") + ")"; }},
      {"aten.atan2.default", [](const ArgExpr& a) { return "atan2f(" + req(a, 0, "self") + ", " + req(a, 1, "other") + ")"; }},
      {"aten.gt.Scalar", compare(">")},  {"aten.gt.Tensor", compare(">")},
      {"aten.ge.Scalar", compare(">=")}, {"aten.ge.Tensor", compare(">=")},
      {"aten.lt.Scalar", compare("<")},  {"aten.lt.Tensor", compare("<")},
      {"aten.le.Scalar", compare("<=")}, {"aten.le.Tensor", compare("<=")},
      {"aten.eq.Scalar", compare("==")}, {"aten.eq.Tensor", compare("==")},
      {"aten.ne.Scalar", compare("!=")}, {"aten.ne.Tensor", compare("!=")},
      {"aten.isnan.default", [](const ArgExpr& a) { return "(float)(" + req(a, 0, "self") + " != " + req(a, 0, "self") + ")"; }},
      {"aten.logical_not.default", logical_not()},
      // ~mask: torch defines it on bool (a logical not, here) and integer tensors (int64_table).
      {"aten.bitwise_not.default", logical_not()},
      {"aten.fmod.Scalar", fmod(false)},
      {"aten.fmod.Tensor", fmod(false)},
      {"aten.remainder.Scalar", remainder(false)},
      {"aten.remainder.Tensor", remainder(false)},
      {"aten.logical_and.default", logical("&&")},
      {"aten.logical_or.default", logical("||")},
      {"aten.logical_xor.default", logical("!=")},
      {"aten.where.self",
       [](const ArgExpr& a) {
         return "(" + req(a, 0, "condition") + " != 0.f ? " + req(a, 1, "self") + " : " + req(a, 2, "other") + ")";
       }},
  };
  return t;
}

}  // namespace

bool is_elementwise_op(const std::string& op) { return table().count(op) > 0; }

// minimum, maximum and the clamps through functions `min` and `max`.
std::map<std::string, Emit> bounds(const std::string& min, const std::string& max) {
  auto call = [](const std::string& fn, const std::string& x, const std::string& y) { return fn + "(" + x + ", " + y + ")"; };
  return {{"aten.minimum.default", [=](const ArgExpr& a) { return call(min, req(a, 0, "self"), req(a, 1, "other")); }},
          {"aten.maximum.default", [=](const ArgExpr& a) { return call(max, req(a, 0, "self"), req(a, 1, "other")); }},
          {"aten.clamp_min.default", [=](const ArgExpr& a) { return call(max, req(a, 0, "self"), req(a, 1, "min")); }},
          {"aten.clamp_max.default", [=](const ArgExpr& a) { return call(min, req(a, 0, "self"), req(a, 1, "max")); }},
          {"aten.clamp.default", [=](const ArgExpr& a) {
             std::string e = req(a, 0, "self");
             const std::string lo = a(1, "min"), hi = a(2, "max");
             if (!lo.empty()) e = call(max, e, lo);
             if (!hi.empty()) e = call(min, e, hi);
             return e;
           }}};
}

// The ops whose form in integers or over operands that cannot be NaN is not the float one.
const std::map<std::string, Emit>& special_table(Arith arith) {
  auto integer = [](const std::string& abs, const std::string& min, const std::string& max) {
    std::map<std::string, Emit> t = bounds(min, max);
    t.insert({{"aten.bitwise_not.default", unary("~")},
              {"aten.fmod.Scalar", fmod(true)},
              {"aten.fmod.Tensor", fmod(true)},
              {"aten.remainder.Scalar", remainder(true)},
              {"aten.remainder.Tensor", remainder(true)},
              {"aten.abs.default", unary(abs)}});
    return t;
  };
  static const std::map<std::string, Emit> none, int64 = integer("llabs", "llmin", "llmax"), int32 = integer("abs", "min", "max"),
                                             no_nan = bounds("fminf", "fmaxf");
  return arith == Arith::Int64 ? int64 : arith == Arith::Int32 ? int32 : arith == Arith::FloatNoNan ? no_nan : none;
}

bool is_int64_op(const std::string& op) {
  static const std::set<std::string> ops = {"aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar",
                                            "aten.mul.Tensor", "aten.mul.Scalar", "aten.neg.default", "aten.where.self",
                                            "aten._to_copy.default"};
  return ops.count(op) > 0 || special_table(Arith::Int64).count(op) > 0;
}

std::string int_literal(double v) { return std::to_string((long long)v) + "LL"; }

std::string number_literal(double v, bool int64) {
  return int64 && std::isfinite(v) && v == std::floor(v) ? int_literal(v) : float_literal(v);
}

std::vector<std::string> supported_elementwise_ops() {
  std::vector<std::string> ops;
  for (const auto& [k, v] : table()) ops.push_back(k);
  return ops;
}

std::vector<std::pair<size_t, std::string>> tensor_operands(const Node& n) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t i = 0; i < n.args.size(); ++i)
    if (is_value_ref(n.args[i])) out.emplace_back(i, value_ref(n.args[i]));
  for (const auto& [k, v] : n.kwargs.items())
    if (is_value_ref(v)) out.emplace_back(SIZE_MAX, value_ref(v));
  return out;
}

std::string float_literal(double v) {
  if (std::isnan(v)) return "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) return v > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  std::string s = format_float((double)(float)v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string elementwise_expr(const Node& n, const ArgExpr& arg, Arith arith) {
  if (n.op == "aten._to_copy.default" && n.kwargs.contains("dtype")) {  // x.half(), x.bfloat16(): a rounding
    const std::string to = n.kwargs.at("dtype").value("dtype", "");
    if (is_half(to)) return "fusetune::round_" + half_suffix(to) + "((float)" + req(arg, 0, "self") + ")";
    if (to == "bool") return "(float)(" + req(arg, 0, "self") + " != 0)";  // bools are 0 / 1 in kernels
    if (to == "int64") return (arith == Arith::Int32 ? "(int)(" : "(long long)(") + req(arg, 0, "self") + ")";  // toward zero, as PyTorch
  }
  if (const auto it = special_table(arith).find(n.op); it != special_table(arith).end()) return it->second(arg);
  const auto it = table().find(n.op);
  if (it == table().end()) FT_THROW("not an elementwise op: " + n.op);
  return it->second(arg);
}

}  // namespace fusetune
