#include "index_range.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace fusetune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Range between(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return Range::unknown();
  return Range{std::min(a, b), std::max(a, b), false};
}

Range hull(const Range& a, const Range& b) {
  return Range{std::min(a.lo, b.lo), std::max(a.hi, b.hi), a.nan || b.nan};
}

// f over the corners of a x b (f monotonic in each argument over the ranges: +, -, *, /).
template <class F>
Range corners(const Range& a, const Range& b, F f) {
  if (a.nan || b.nan) return Range::unknown();
  const double c[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
  Range r = between(c[0], c[1]);
  for (double v : {c[2], c[3]}) {
    if (std::isnan(v) || r.nan) return Range::unknown();
    r.lo = std::min(r.lo, v);
    r.hi = std::max(r.hi, v);
  }
  return r;
}

// Each value of r rounded to float32: rounding is monotonic, off by at most 2^-24 of the value
// (of a normal one) or 2^-149 (of a subnormal one); a bound of 0 stays exact.
Range rounded(Range r) {
  if (r.nan) return r;
  const double lo = r.lo - std::fabs(r.lo) * 0x1p-22 - 0x1p-140, hi = r.hi + std::fabs(r.hi) * 0x1p-22 + 0x1p-140;
  return Range{r.lo >= 0 ? std::max(lo, 0.0) : lo, r.hi <= 0 ? std::min(hi, 0.0) : hi, false};
}

// int64 results are exact in doubles up to 2^53; past that nothing is known.
Range integral(Range r) {
  if (r.nan || std::fabs(r.lo) > 0x1p53 || std::fabs(r.hi) > 0x1p53) return Range::unknown();
  return r;
}

Range truth(bool always, bool never) { return always ? Range::point(1) : never ? Range::point(0) : Range{0, 1, false}; }
bool always_true(const Range& r) { return !r.nan && (r.lo > 0 || r.hi < 0); }
bool always_false(const Range& r) { return r.is_point() && r.lo == 0; }

Range compare(const std::string& opr, const Range& a, const Range& b) {
  if (a.nan || b.nan) return Range{0, 1, false};
  if (opr == "gt") return truth(a.lo > b.hi, a.hi <= b.lo);
  if (opr == "ge") return truth(a.lo >= b.hi, a.hi < b.lo);
  if (opr == "lt") return truth(a.hi < b.lo, a.lo >= b.hi);
  if (opr == "le") return truth(a.hi <= b.lo, a.lo > b.hi);
  const bool equal = a.is_point() && b.is_point() && a.lo == b.lo, apart = a.hi < b.lo || b.hi < a.lo;
  return opr == "eq" ? truth(equal, apart) : truth(apart, equal);
}

// fmod (the sign of the dividend) and remainder (the sign of the divisor) by a positive constant.
Range modulo(bool python, const Range& x, const Range& m, bool int64) {
  if (x.nan || !m.is_point() || m.lo <= 0) return Range::unknown();
  const double top = int64 ? m.lo - 1 : m.lo;
  if (x.lo >= 0 && x.hi < m.lo) return x;
  if (python || x.lo >= 0) return Range{0, x.lo >= 0 ? std::min(x.hi, top) : top, false};
  return Range{-top, top, false};
}

}  // namespace

Range Range::unknown() { return Range{-kInf, kInf, true}; }
Range Range::point(double v) { return std::isnan(v) ? unknown() : Range{v, v, false}; }

bool Range::fits_int32() const {
  return !nan && lo >= -2147483647.0 && hi <= 2147483647.0 && lo == std::floor(lo) && hi == std::floor(hi);
}

Range op_range(const Node& n, const RangeArg& arg, bool int64) {
  const std::string op = n.op.substr(5, n.op.find('.', 5) - 5);  // "aten.add.Tensor" -> "add"
  auto need = [&](size_t i, const char* kw) { return arg(i, kw).value_or(Range::unknown()); };
  auto finish = [&](Range r) { return int64 ? integral(r) : rounded(r); };
  if (op == "add" || op == "sub" || op == "rsub") {
    const bool reversed = op == "rsub";
    Range self = need(reversed ? 1 : 0, reversed ? "other" : "self"), other = need(reversed ? 0 : 1, reversed ? "self" : "other");
    if (auto alpha = arg(2, "alpha")) other = finish(corners(other, *alpha, [](double x, double y) { return x * y; }));
    if (op == "add") return finish(corners(self, other, [](double x, double y) { return x + y; }));
    return finish(corners(self, other, [](double x, double y) { return x - y; }));
  }
  if (op == "mul") return finish(corners(need(0, "self"), need(1, "other"), [](double x, double y) { return x * y; }));
  if (op == "div") {
    const Range d = need(1, "other");
    if (d.nan || (d.lo <= 0 && d.hi >= 0)) return Range::unknown();
    return finish(corners(need(0, "self"), d, [](double x, double y) { return x / y; }));
  }
  if (op == "neg") {
    const Range x = need(0, "self");
    return Range{-x.hi, -x.lo, x.nan};
  }
  if (op == "abs") {
    const Range x = need(0, "self");
    if (x.lo >= 0) return x;
    if (x.hi <= 0) return Range{-x.hi, -x.lo, x.nan};
    return Range{0, std::max(-x.lo, x.hi), x.nan};
  }
  if (op == "minimum" || op == "maximum" || op == "clamp" || op == "clamp_min" || op == "clamp_max") {
    Range x = need(0, "self");
    // (the lower bound, the upper bound): minimum's other is an upper bound, maximum's a lower one
    std::optional<Range> lo, hi;
    if (op == "minimum") hi = need(1, "other");
    else if (op == "maximum") lo = need(1, "other");
    else if (op == "clamp_min") lo = need(1, "min");
    else if (op == "clamp_max") hi = need(1, "max");
    else lo = arg(1, "min"), hi = arg(2, "max");
    if (lo) x = Range{std::max(x.lo, lo->lo), std::max(x.hi, lo->hi), x.nan || lo->nan};
    if (hi) x = Range{std::min(x.lo, hi->lo), std::min(x.hi, hi->hi), x.nan || hi->nan};
    return x;
  }
  if (op == "floor" || op == "ceil" || op == "round" || op == "trunc") {
    double (*f)(double) = op == "floor" ? static_cast<double (*)(double)>(std::floor)
                          : op == "ceil"  ? static_cast<double (*)(double)>(std::ceil)
                          : op == "round" ? static_cast<double (*)(double)>(std::nearbyint)
                                          : static_cast<double (*)(double)>(std::trunc);
    const Range x = need(0, "self");
    return x.nan ? x : Range{f(x.lo), f(x.hi), false};
  }
  if (op == "_to_copy") {
    const Range x = need(0, "self");
    const std::string to = n.kwargs.contains("dtype") ? n.kwargs.at("dtype").value("dtype", "") : "";
    if (to == "bool") return truth(always_true(x), always_false(x));
    if (to == "int64") return x.nan ? x : integral(Range{std::trunc(x.lo), std::trunc(x.hi), false});
    if (to.empty() || to == "float32") return rounded(x);
    return Range::unknown();
  }
  if (op == "gt" || op == "ge" || op == "lt" || op == "le" || op == "eq" || op == "ne")
    return compare(op, need(0, "self"), need(1, "other"));
  if (op == "isnan") return truth(false, !need(0, "self").nan);
  if (op == "logical_not" || (op == "bitwise_not" && !int64)) {
    const Range x = need(0, "self");
    return truth(always_false(x), always_true(x));
  }
  if (op == "bitwise_not") {  // ~x = -x - 1
    const Range x = need(0, "self");
    return Range{-x.hi - 1, -x.lo - 1, x.nan};
  }
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor") {
    const Range a = need(0, "self"), b = need(1, "other");
    const bool at = always_true(a), af = always_false(a), bt = always_true(b), bf = always_false(b);
    if (op == "logical_and") return truth(at && bt, af || bf);
    if (op == "logical_or") return truth(at || bt, af && bf);
    return truth((at && bf) || (af && bt), (at && bt) || (af && bf));
  }
  if (op == "where") {
    const Range c = need(0, "condition"), self = need(1, "self"), other = need(2, "other");
    if (always_true(c)) return self;
    if (always_false(c)) return other;
    return hull(self, other);
  }
  if (op == "remainder" || op == "fmod") return modulo(op == "remainder", need(0, "self"), need(1, "other"), int64);
  return Range::unknown();
}

}  // namespace fusetune
