// Planning: splits the captured graph into kernel groups. A group has an optional anchor (a
// matrix product for the gemm family) and a fused chain of elementwise ops; views are read
// through strides. Each group knows its tensor slots and the generated Op that fuses its chain.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph.h"
#include "json.h"
#include "layout.h"

namespace fusetune {

enum class Access { Operand, Full, Strided, Output };
const char* access_name(Access a);

// A row group's input read along part of each row only (a part of a torch.cat along the reduced
// dimension): elements [begin, end) of a row are loaded, every other one is `fill` (a literal).
struct SlotRange {
  int64_t begin, end;
  std::string fill;
  bool operator==(const SlotRange& o) const { return begin == o.begin && end == o.end && fill == o.fill; }
};

struct Slot {
  Layout layout;  // for outputs: contiguous over the output value, or as written_as places it
  Access access;
  std::string dtype = "float32";  // float32, or int64 (elementwise groups; a row group's arg indices)
  std::optional<SlotRange> range = std::nullopt;
};

struct GroupOutput {
  std::string value;
  std::string var;  // the C++ variable holding it inside Op::apply
  std::vector<int64_t> shape;
  std::string dtype = "float32";
  // A value stored in another order: where each element of the group's domain goes in the
  // output (a row group's flip of the value, an attention group's permutation of it, written by
  // the group itself; shape is then the output's). Else the value is stored in the domain's order.
  std::optional<Layout> written_as = std::nullopt;
};

// Bytes per element of a slot or output dtype.
int64_t dtype_bytes(const std::string& dtype);

// torch's convolution arguments besides its tensors (a conv group's anchor).
struct ConvParams {
  bool transposed = false;
  int64_t groups = 1;
  std::vector<int64_t> stride, padding, dilation, output_padding;  // one per spatial dimension

  json to_json() const;
  static ConvParams from_json(const json& j);
};

// scaled_dot_product_attention's arguments besides its tensors (an attention group's anchor:
// q, k and v in slots 0 to 2; m = Sq, n = Sk, k = the head dimension, batch = batch x heads).
struct AttentionParams {
  bool causal = false;
  double scale = 1.0;

  json to_json() const;
  static AttentionParams from_json(const json& j);
};

struct Group {
  std::string id;      // g0, g1, ... in execution order
  std::string family;  // elementwise, gemm, reduce, conv, attention
  std::vector<std::string> nodes;
  std::vector<std::string> ops;
  std::vector<int64_t> index_shape;
  std::vector<Slot> slots;
  std::vector<GroupOutput> outputs;
  int64_t m = 0, n = 0, k = 0, batch = 0;  // gemm and attention (AttentionParams)
  int bias_slot = -1;  // gemm: slot of a per-column bias that a library may add inside the product
  ConvParams conv;     // conv only: x in slot 0, the weight in slot 1
  AttentionParams attention;  // attention only
  // reduce: statistics per row, passes over each row, outputs per element (besides per row),
  // scans along the row, inputs that change along a row (the others are per run or per row),
  // neighbouring rows that one thread can move as vectors (Op::kRowVec)
  int stats = 0, passes = 0, full_outputs = 0, scans = 0, varying_inputs = 0, row_vector = 1;
  int full_slot = 0, n_full = 0, out_slot = 0;  // slot ranges the templates load/store
  std::string op_struct;  // generated `struct <id>_op { ... };`
  // The earlier group whose kernel this one is (the same code on tensors of the same shapes,
  // strides and alignment, at other offsets maybe: an RNN's time steps, a network's repeated
  // blocks); empty if none. Such a group is not searched or emitted: it calls that group's kernel
  // (mark_twins in plan.cpp).
  std::string same_as;

  int64_t numel() const;
  std::string op_type() const { return "fusetune_gen::" + id + "_op"; }
  // Distinct materialized input values, in first-slot order: the kernel's tensor arguments.
  std::vector<std::string> input_values() const;
  int64_t bytes_moved(const std::map<std::string, int64_t>& value_numel) const;
  json to_json() const;
  // Reads back what to_json wrote (everything but the generated Op).
  static Group from_json(const json& j);
};

// State the model's forward updates in place (BatchNorm's running statistics): the group output
// holding the new value and the buffer (or input) it is stored into.
struct Mutation {
  std::string value;
  std::string kind;    // buffer or input
  std::string target;  // the buffer's attribute path, or the input's name
};

struct Plan {
  std::vector<Group> groups;
  // Graph output i is returned as this materialized value (a group output, input or parameter).
  std::vector<std::string> outputs;
  std::vector<Mutation> mutations;
  json to_json() const;
};

// Throws UserError naming the op and the model line when something cannot be lowered.
Plan plan_graph(const Graph& g);

}  // namespace fusetune
