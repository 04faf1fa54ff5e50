// Strided views over materialized tensors, and the ATen view ops that transform them, so that
// transposes, reshapes and broadcasts are read through strides instead of copied.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph.h"

namespace fusetune {

struct Layout {
  std::string base;  // the value that owns the memory
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  static Layout contiguous(const std::string& base, const std::vector<int64_t>& sizes);
  bool is_contiguous() const;  // row-major dense with offset 0 (size-1 dims ignored)
  int64_t numel() const;
  bool operator==(const Layout& o) const {
    return base == o.base && sizes == o.sizes && strides == o.strides && offset == o.offset;
  }
};

bool is_view_op(const std::string& op);
bool is_identity_op(const std::string& op);  // clone, alias, _to_copy to float32, ...

// Applies view node n to layout `in`; empty when the result cannot be expressed as strides over
// the same memory (e.g. a reshape of a transposed tensor).
std::optional<Layout> apply_view(const Node& n, const Layout& in, const std::vector<int64_t>& out_shape);

// The same elements, in row-major order, viewed as `shape` (a reshape); empty where strides
// cannot express it.
std::optional<Layout> reshape(const Layout& in, const std::vector<int64_t>& shape);

// Aligns `in` to `shape` by broadcasting (right-aligned; stride 0 where it repeats).
std::optional<Layout> broadcast_to(const Layout& in, const std::vector<int64_t>& shape);

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);

// The same view with size-1 dimensions dropped and neighbours merged where the outer one's
// stride is the inner one's times its size (contiguous runs and broadcast runs alike).
Layout merged_dims(const Layout& l);

// C++ expression of the element offset, in l's memory, of linear index `idx` (a long long) of
// l's sizes, with the sizes and strides as literals: dimensions that merge are merged, broadcast
// ones cost nothing, and the divisions are by constants (multiplications once compiled), in 32
// bits where the index space allows. E.g. a per-channel [32, 64, 256, 256] view with strides
// [0, 1, 0, 0]: "(long long)(((unsigned)idx / 65536u) % 64u)".
std::string offset_expr(const Layout& l, const std::string& idx);
// The same in ints, for a layout whose offset_span (with what the caller adds) fits in 31 bits.
std::string int_offset_expr(const Layout& l, const std::string& idx);
// The largest distance of an element of l from its first, in elements: the sum of
// (size - 1) * |stride|.
int64_t offset_span(const Layout& l);

}  // namespace fusetune
