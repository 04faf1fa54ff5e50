// The values an index value can take (Planner::add_index): an interval carried through the ops
// that compute it from positions and constants. With it the planner computes an index in 32 bits
// where it fits, folds the comparisons and selects it decides (an interpolation's wrap of
// negative indices, its out-of-range masks) and drops a gather's range check where the index
// cannot leave the gathered dimension.
#pragma once
#include <functional>
#include <optional>

#include "graph.h"

namespace fusetune {

struct Range {
  double lo, hi;  // bounds, possibly infinite
  bool nan;       // may be NaN: nothing is decided

  static Range unknown();
  static Range point(double v);
  bool is_point() const { return !nan && lo == hi; }
  // Every value is an integer in [-2^31 + 1, 2^31 - 1] (a 32-bit int holds it).
  bool fits_int32() const;
  bool within(double a, double b) const { return !nan && lo >= a && hi <= b; }
};

// The range of argument i (keyword kw) of a node: nullopt where it is absent.
using RangeArg = std::function<std::optional<Range>(size_t i, const char* kw)>;

// The range of elementwise node n's result from its arguments' ranges: exact for int64 results
// (unknown past 2^53), widened by float32's rounding for float ones. Unknown for ops it does not
// follow. A comparison's or logical op's result is 0 or 1.
Range op_range(const Node& n, const RangeArg& arg, bool int64);

}  // namespace fusetune
