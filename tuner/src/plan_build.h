// What the planner builds for one group while it walks the graph (plan.cpp), and the two code
// generators that turn it into a Group with its Op struct: plan_finalize.cpp for elementwise and
// matrix-product groups, plan_rows.cpp for row groups (reductions with the chains around them).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph.h"
#include "layout.h"
#include "plan.h"
#include "pool.h"

namespace fusetune {

// In a row group, whether a value has one element per element of the reduced input (Full) or
// one per output row (Reduced).
enum class Level { Full, Reduced };

// How a row group's reduction statistic accumulates (the numbering of templates/reduce.cuh).
// The kernel's kStat* (templates/reduce.cuh). ArgMax / ArgMin: the index of the first maximum
// (minimum) of the row, held as a float next to its partner Max (Min) statistic.
enum class StatKind { Sum = 0, Max = 1, Min = 2, ExpSum = 3, Prod = 4, ArgMax = 5, ArgMin = 6 };
enum class ScanKind { Sum = 0, Prod = 1 };
// The phase of a scanned value and what depends on it: known in the final pass over a row only.
constexpr int kScanPhase = 1 << 20;

// One op of a group's chain and how each tensor operand is reached.
struct Step {
  const Node* node;  // null for a copy: the variable is the one loaded operand
  std::string var;
  bool anchor = false;
  std::map<std::string, std::string> fused_operands;  // value -> var
  std::map<std::string, Layout> loaded_operands;      // value -> layout aligned to the node's shape
  // Row groups only. Loaded layouts are aligned to the group's domain (the reduced input's shape).
  Level level = Level::Full;
  int phase = 0;  // reduction passes that must finish before this value is known
  int stat = -1;  // for a reduction: its statistic
  int scan = -1;  // for a cumsum / cumprod: its scan
  std::optional<PoolOp> pool = std::nullopt;  // a pooling op: its one loaded operand is the input's own view
  bool int64 = false;  // elementwise groups: its value is int64 (a long long variable); else float
  bool int_division = false;  // a division of int64 operands: a true one, in floats, as torch's
  // A gather (elementwise groups only; gather_extent > 0): its input's stride (negative in a
  // flipped input) and extent along the gathered dimension. The input is loaded through a view
  // over the result with stride 0 there, plus index * stride; an index outside [0, extent)
  // traps, where torch raises (unless the index's range keeps it inside: gather_checked false).
  int64_t gather_stride = 0, gather_extent = 0;
  bool gather_checked = true;
  // An index value written out (elementwise groups only, node null): the step's expression.
  std::string index_expr = {};
  // The declarations that the index values it reads need (Planner::index_expr), before its own,
  // and their names by what they compute.
  std::string index_lines = {};
  std::map<std::string, std::string> index_names = {};
  // torch.cat (elementwise groups only): the parts in order, each up to coordinate `end` along
  // the concatenated dimension (cat_at: that coordinate's expression), read through
  // loaded_operands[operand] (the part's strides over the result's sizes, `shift` elements
  // back) or fused_operands[operand] (a constant).
  struct CatPart {
    std::string operand;
    int64_t end, shift;
  };
  std::vector<CatPart> cat = {};
  std::string cat_at = {};
  // constant_pad_nd (elementwise groups only): its one loaded operand (the input's strides over
  // the result's sizes) read `pad_shift` elements back where pad_inside holds, else pad_value.
  std::string pad_inside = {}, pad_value = {};
  int64_t pad_shift = 0;
};

// A reduction of a row group, accumulated during pass `pass` over the row's elements from its
// node's input (for an ExpSum, from its partner's input).
struct RowStat {
  StatKind kind = StatKind::Sum;
  int pass = 0;
  int partner = -1;   // ExpSum: the Max statistic m of the same input a; ArgMax / ArgMin: their Max / Min
  std::string shift;  // ExpSum: the Reduced variable s of sum(exp(a - s))
  bool mean = false;  // divide by the reduced count
};

struct RowInfo {
  std::vector<int64_t> domain;  // shape of the reduced input
  std::vector<bool> reduced;    // which domain dimensions are reduced
  std::vector<RowStat> stats;
  std::vector<ScanKind> scans;  // inclusive scans along the row, in the final pass
  int passes = 0;      // passes over the row that accumulate statistics
  int n_reduced = 0;   // Reduced variables red[0..n_reduced)

  std::vector<int64_t> kept() const;  // the domain's sizes along the kept dimensions: one value per row
};

// `shape` without its size-1 dimensions: two shapes equal this way hold the same elements in the
// same order when contiguous.
std::vector<int64_t> without_unit_dims(const std::vector<int64_t>& shape);

struct Building {
  Group group;
  // Values the group reads from memory in another dtype than float32: int64, bool (inputs and
  // state of the model; a bool the kernels computed is written as float 0 / 1), float16 or
  // bfloat16.
  std::map<std::string, std::string> typed_values;
  std::vector<Step> steps;
  std::vector<Layout> operands;  // an anchor's (a matrix product's a and b): the first slots
  RowInfo row;  // family "reduce" only
  // A step reads an index value (arange) as an expression of the linear index idx, which only
  // elementwise and matrix-product groups have: the group never becomes a row group.
  bool reads_index = false;
  // Views of the group's values held fused (forward): each may be written out too, so has_room
  // counts the ones still to be read.
  std::vector<std::string> fused_views;

  // The dtype the group reads `base` in from memory: float32 unless typed_values says otherwise.
  std::string dtype_of(const std::string& base) const {
    const auto it = typed_values.find(base);
    return it == typed_values.end() ? "float32" : it->second;
  }
};

// What a row group reads outside each memory part's range of a cat step's row (SlotRange::fill),
// such that the parts' loads add up to the cat: the constant parts' value when there is one memory
// part, else 0 (the constant parts must be 0 then). Empty when no fill works, or no part is memory.
std::optional<std::string> cat_fill(const Step& s);

// A layout over a row shape (the reduced shape, with or without the reduced dimensions kept) as a
// view over the domain, with stride 0 along the reduced dimensions; empty if they do not line up.
std::optional<Layout> row_to_domain(const RowInfo& row, Layout l);

// Element `at` of slot pointer `slot` (a float*) holding `dtype`, as the float (or int64) the
// kernels compute with: the generated code of a load.
std::string typed_load(const std::string& slot, const std::string& dtype, const std::string& at);
Group finalize_group(Building& b);
Group finalize_rows(Building& b);

}  // namespace fusetune
