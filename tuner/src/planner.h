// The planner's state while it walks the graph (plan.cpp for the walk, elementwise chains,
// anchors and pooling; plan_rows_join.cpp for row groups: reductions and scans with the chains
// around them). Internal to planning.
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "families.h"
#include "graph.h"
#include "index_range.h"
#include "plan_build.h"

namespace fusetune {

int64_t numel_of(const std::vector<int64_t>& shape);
bool is_reduction_op(const std::string& op);
// argmax / argmin: reductions whose result is an int64 index.
bool is_arg_reduction(const std::string& op);
// cumsum / cumprod.
bool is_scan_op(const std::string& op);
// The dimensions whose elements make a row of row op n (a reduction or a scan) over an input of
// `rank` dimensions; empty for any other op.
std::optional<std::vector<bool>> row_dims(const Node& n, int64_t rank);
// Whether rows along `reduced` of a value of `shape` run along dimension `dim` alone (the others
// reduced have size 1): a cat along dim is read in ranges of them.
bool along_cat(const std::vector<bool>& reduced, int64_t dim, const std::vector<int64_t>& shape);

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
  explicit Planner(const Graph& g);

  Plan run();

 private:
  std::optional<Mutation> add_mutation(const json& m);
  [[noreturn]] void unsupported(const Node& n, const std::string& why);

  void check_float(const std::string& value, const Node* n, bool int64_ok = false);
  std::string memory_dtype(const std::string& value) const;

  // A value read from memory by node n: float32 tensors; with int64_ok (an elementwise step's
  // loads) int64, bool and half ones too; with half_ok half ones as they are; else a half
  // tensor's float32 copy (float_copy).
  const Layout& operand(const std::string& v, const Node& n, bool int64_ok = false, bool half_ok = false);
  const Layout& float_copy(const std::string& v, const Node& n);

  void visit(const Node& n);

  // Refuses an as_strided whose strides do not count the input's elements (plan.cpp says when).
  void check_as_strided(const Node& n);

  // Identity and view ops produce no code: the result is the same register or a new layout.
  void forward(const Node& n, const std::string& in, const std::vector<int64_t>& shape, bool is_view);

  // A float32, int64 or bool (0 / 1) constant made in the graph (scalar_tensor, full,
  // full_like): inlined as a literal where it is used.
  void add_constant(const Node& n, const ValueInfo& out);

  // arange: an index value, in neither a group nor memory. Elementwise steps and gathers inline
  // it as start + step * (its offset), through the views taken of it (index_values_); any other
  // op reads it from memory, written by an elementwise group (materialize_index) before its own.
  // An elementwise op over index values and constants only (a relative position's bucket, an
  // interpolation's source index and weight, a causal mask) is an index value too (derived_),
  // recomputed where it is read.
  void add_index(const Node& n, const ValueInfo& out);
  // The expression of index value `view` at element `idx` of its reader `step`; the variables it
  // needs (derived values, their coordinates) are declared in step.index_lines.
  std::string index_expr(const Layout& view, const std::string& idx, Step& step) const;
  // The values index value or constant v takes (unknown for any other value).
  Range range_of(const std::string& v) const;
  void materialize_index(const std::string& value);
  // A constant (torch.zeros: an RNN's initial state when it is given none) that an anchor reads
  // from memory: written by an elementwise group before the anchor's.
  void materialize_constant(const std::string& value);
  // Value v, which reads no tensor (expr(step): its expression at element idx), written by the
  // latest elementwise group over as many elements, else a new one; returns that group.
  int write_unread(const std::string& value, const std::string& op, const std::function<std::string(Step&)>& expr);

  // torch.cat: a step over the result picking, by the coordinate along the concatenated
  // dimension, the part it falls in, read from memory (or a constant). Where its first reader is
  // a reduction or scan along that dimension (or a slice, then the same of the slice), it waits
  // (cats_) and that row op reads the parts where they lie (rows_over_cat); a slice of it is
  // another waiting cat (view_cat). Else it is computed by an elementwise group (realize_cat)
  // where it is made, or where a reader needs it.
  void add_cat(const Node& n, const ValueInfo& out);
  void realize_cat(const std::string& v);
  // Whether cat v (along `dim`) waits for its first reader: a row op along dim (along_cat), or a
  // slice that waits for its own. The readers after that row op find v in its row group.
  bool cat_waits(const std::string& v, int64_t dim) const;
  // The nodes reading v (readers_), each once, in graph order.
  const std::vector<const Node*>& readers_of(const std::string& v) const;
  // Whether a reduction or scan reads v, directly or through elementwise ops and views.
  bool feeds_row_op(const std::string& v) const;
  // Whether view n of waiting cat `in` is a cat too (a slice with steps of 1 along the cat's
  // dimension), made so; false: nothing done.
  bool view_cat(const Node& n, const std::string& in, const std::vector<int64_t>& shape);
  // constant_pad_nd (F.pad with a constant): an elementwise step over the result reading the
  // input where the coordinates fall inside it, the constant elsewhere.
  void add_pad(const Node& n, const ValueInfo& out);
  // A pad along one dimension (none cropped) whose first reader is a row op along it: a waiting
  // cat of the input between constants (true), else nothing done.
  bool pad_as_cat(const Node& n, const std::vector<int64_t>& pad, const std::string& value, const Layout& in,
                  const std::vector<int64_t>& shape);

  // Tensor operands of n that live in a group or in memory (constants are inlined instead).
  std::vector<std::pair<size_t, std::string>> computed_operands(const Node& n);

  void add_elementwise(const Node& n, const ValueInfo& out);
  // torch.gather: an elementwise step over the index's shape reading its input from memory at
  // the index along the gathered dimension.
  void add_gather(const Node& n, const ValueInfo& out);

  // How step (node n, result `shape`, joining group gi) reaches each operand: a constant, a
  // variable of gi, or a load aligned to the shape (per_row: then viewed over that row group's
  // domain); values fused elsewhere are written to memory first.
  void resolve_operands(const Node& n, int gi, const std::vector<int64_t>& shape,
                        const std::vector<std::pair<size_t, std::string>>& operands, const RowInfo* per_row, Step& step);

  void add_anchor(const Node& n, const ValueInfo& out, const Family& family);
  int plan_anchor(const Node& n, const ValueInfo& out, const Family& family);
  bool multiplies_half_operands(int gi, const Node& n, const Family& family, const std::set<std::string>& written);
  // Whether value v, just written in float32 for anchor n, may be stored as `dtype` (half)
  // instead: the model holds it so, its group stores half (not a row group), and nothing but n
  // and elementwise steps reads it (through views too). store_half does it.
  bool half_storable(const std::string& v, const Node& n, const std::string& dtype) const;
  void store_half(const std::string& v, const std::string& dtype);

  // ---- Row groups (plan_rows_join.cpp).

  bool is_row_group(int gi) const { return groups_[gi].group.family == "reduce"; }

  // Whether `shape` is the shape of a row of group gi, with or without the reduced dimensions kept.
  bool is_row_shape(int gi, const std::vector<int64_t>& shape) const;

  // Whether a fused value of group gi, broadcast to the domain, holds the right element for
  // every domain element: a Full value must have the domain's own order, a Reduced one must
  // vary along the kept dimensions only, in row order.
  bool fits_domain(int gi, const Fused& f) const;

  // Joins elementwise node n to row group gi when its result is per domain element or per row;
  // false when it cannot (the caller then starts a new group).
  bool join_row(int gi, const Node& n, const ValueInfo& out, const std::vector<std::pair<size_t, std::string>>& operands);

  std::string next_row_var(int gi) { return "red[" + std::to_string(groups_[gi].row.n_reduced++) + "]"; }

  // Appends a step computing `value` (by op) to group gi.
  void add_step(int gi, const std::string& value, const std::string& op, Step step);

  // The row group that reduction n (of fused value v over `reduced`) can join: v's own group when
  // it is a row group over the same rows, or an elementwise group over v's shape that becomes
  // one (its chain is then fused into the reduction's loads); -1 for none.
  int row_group_for(const Fused& f, const std::vector<int64_t>& shape, const std::vector<bool>& reduced);

  // The row group that row op n over value v (rows along `reduced`) joins: v's own group when it
  // can take it, else the last group if it is a row group over the same rows of memory, else a
  // new one. Records how the step reads v.
  int rows_over(const Node& n, const std::string& v, const std::vector<bool>& reduced, Step& step);
  // Row group `rows_over` opens for rows along `reduced` of `shape`, reading memory written by
  // group `after`: the last group if it is a row group over the same rows, else a new one.
  int row_group_after(int after, const std::vector<int64_t>& shape, const std::vector<bool>& reduced);
  // The row group that waiting cat v joins for rows along `reduced`: -1 unless they run along
  // its concatenated dimension and its parts can be read as ranges of them (cat_fill).
  int rows_over_cat(const std::string& v, const std::vector<bool>& reduced);

  // cumsum / cumprod along one dimension: a row group whose rows run along it, the scanned value
  // known per element in the final pass only (so no reduction of the same group can read it).
  void add_scan(const Node& n, const ValueInfo& out);

  // A reduction over size-1 dimensions only (an argmax or argmin aside) is a reshape of its input.
  void add_reduction(const Node& n, const ValueInfo& out);

  // sum(exp(a - s)) where an earlier statistic is amax(a) over the same rows and s is known when
  // that maximum is (softmax's and logsumexp's s is the maximum itself): the sum is accumulated in
  // the maximum's pass with the online rescaling, saving a pass over the data.
  void online_exp_sum(int gi, const std::string& v, RowStat& stat);

  // The step computing fused value v in group gi, if any.
  const Step* fused_step(int gi, const std::string& v) const;

  // getitem(t, 0) of max pooling (which returns values and indices) is the pooling itself;
  // getitem(t, k) of a split its part k.
  void add_getitem(const Node& n, const ValueInfo& out);
  void add_split_part(const Node& split, const Node& n);

  // A pooling op (node n, producing `value`) is one value of an elementwise chain that reads its
  // input's window from memory; the chain after it fuses as after any elementwise op.
  void add_pool(const Node& n, const std::string& value, const ValueInfo& out);

  // A result stays in a register (bool for comparisons) or is a float32 tensor, an int64 one
  // (the int64 ops), or a half one (an elementwise result, stored converted).
  void check_result(const Node& n, const ValueInfo& out);

  int new_group(const std::string& family, const std::vector<int64_t>& shape);

  // Whether group gi can take a step that loads `loads` more tensors within a kernel's
  // kMaxSlots; new_loads: those of node n's operands.
  bool has_room(int gi, int loads) const;
  int new_loads(int gi, const std::vector<std::pair<size_t, std::string>>& operands) const;
  // The latest group after `after`, not a row group, over `numel` elements, with room for
  // loads(group) more tensors; -1 for none.
  int latest_group_over(int64_t numel, int after, const std::function<int(int)>& loads) const;
  // An index value not written: computed where it is read (once written, it is loaded).
  bool inlined_index(const std::string& v) const;
  static void for_each_ref(const Node& n, const std::function<void(const std::string&)>& f);
  // The group a step that loads `loads` tensors and reads memory written by group `after` starts
  // a chain in: the latest elementwise group over as many elements after it with room, else a new one.
  int chain_group(const std::vector<int64_t>& shape, int after, int loads);

  std::string next_var() { return "v" + std::to_string(var_count_++); }

  // Makes a fused value an output of its group so that later groups read it from memory (a row
  // statistic stays fused as well, for later per-row steps of its group).
  void materialize(const std::string& value);
  // flip(v), node n, of a per-element value v of a row group: the group stores the flip's
  // result itself, each element where the flip puts it, and v is that memory read through the
  // same flip (a flip is its own inverse), instead of v stored and copied reversed. False (and
  // nothing done) for a value that is not such a row value.
  bool materialize_flipped(const Node& n, const std::string& v);
  bool materialize_permuted(const Node& n, const std::string& v, const std::vector<int64_t>& shape);
  GroupOutput fused_output(const std::string& value, const std::string& name);

  // A strided layout that a view cannot reinterpret (or an output must not be) gets copied by an
  // elementwise group: value `value`, under its own name; or `name` with `shape`.
  Layout copy_to_memory(const Layout& src, const Node& n, const std::string& value);
  Layout copy_to_memory(const Layout& src, const Node& n, const std::string& name, const std::vector<int64_t>& shape);
  void add_repeat(const Node& n, const ValueInfo& out);

  std::string materialize_output(const std::string& value);

  const Graph& g_;
  std::vector<Building> groups_;
  std::map<std::string, Fused> fused_;
  std::map<std::string, Layout> memory_;  // values readable from memory, as views of a base
  std::map<std::string, int> producer_;   // base value -> group writing it (-1: model input)
  std::map<std::string, std::string> constants_;  // value -> literal (scalar_tensor, full, full_like)
  std::map<std::string, const Node*> tuples_;     // max pooling with indices or a split, until getitem
  std::deque<Node> synthetic_;                // ops planned in place of others (a split's part: a slice)
  std::map<std::string, int> pending_users_;  // value -> nodes reading it not planned yet
  std::map<std::string, std::vector<const Node*>> readers_;  // value -> nodes reading it, in graph order
  std::set<std::string> kept_;                // the model's outputs and new state: always written
  std::map<std::string, std::string> conversions_;  // half tensor in memory -> its float32 conversion
  std::map<std::string, std::string> stored_half_;  // float32 value stored in half -> that dtype
  struct Iota {
    std::string start, step;  // literals of the value's dtype (ints where narrow)
    std::string op;
    bool narrow;  // the offset read as an int (and int64 values computed in ints): they fit
  };
  std::map<std::string, Iota> iotas_;             // arange node -> its values
  std::map<std::string, Layout> index_values_;    // an arange or a derived value, or a view of one -> the view over it
  std::map<std::string, const Node*> derived_;    // an elementwise op over index values and constants
  std::map<std::string, Range> ranges_;           // an arange, a derived value or a constant -> its values
  // A torch.cat not computed yet (add_cat): its step over `shape` and the latest group writing a part.
  struct PendingCat {
    Step step;
    std::vector<int64_t> shape;
    int64_t dim;
    int latest_producer;
  };
  std::map<std::string, PendingCat> cats_;
  int var_count_ = 0;
};

}  // namespace fusetune
