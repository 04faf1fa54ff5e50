// The captured model graph (graph.json written by tuner/py/fusetune_py/capture.py): core ATen
// nodes over named values with shapes, strides and kinds.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "json.h"

namespace fusetune {

struct ValueInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::string dtype;
  std::string model_dtype;  // the dtype the model holds it in: dtype, or a half one capture computes in float32
  std::string kind;  // input, scalar_input, parameter, buffer, constant, intermediate, tuple
  int index = -1;    // position among user inputs
  json scalar;       // a scalar_input's value (a number get_inputs() gives, baked into the graph)
  std::string target;  // attribute path of a parameter, buffer or constant

  int64_t numel() const;
};

struct Node {
  std::string name;  // also the name of its output value
  std::string op;    // e.g. aten.addmm.default
  json args;         // array; tensors as {"value": name}
  json kwargs;       // object
  std::string source;  // "model.py:14: return ..."
};

struct Graph {
  std::string model_path;
  std::string model_sha256;
  bool training = false;
  json init_args;
  json init_signature;  // {"def": "(self, a, b)", "call": "a, b"} of Model.__init__
  // Plain tensor attributes of Model that forward updates ("hidden", "cell.h"): capture made them
  // non-persistent buffers, and ModelNew does the same.
  std::vector<std::string> state_attributes;
  std::string torch_version;
  std::string cublaslt_path;  // the cuBLASLt library PyTorch loaded at capture ("" when none)
  std::string cudnn_path;     // the same for cuDNN
  int64_t seed = 0;
  std::map<std::string, ValueInfo> values;
  std::vector<Node> nodes;
  std::vector<std::string> outputs;
  json mutations;  // buffers or inputs that forward updates in place (e.g. BatchNorm running stats)

  static Graph load(const std::string& path);
  static Graph from_json(const json& j);
  const ValueInfo& value(const std::string& name) const;
  // User inputs in call order.
  std::vector<const ValueInfo*> inputs() const;
};

// float16 or bfloat16: such tensors are stored as they are and computed in float32
// (templates/half.cuh).
bool is_half(const std::string& dtype);
// A dtype as the templates' element kinds (half.cuh, gemm_tma_split.h's kGemmTma*, reduce.cuh's
// slot_kind): 1 float16, 2 bfloat16, 0 anything else.
int half_kind(const std::string& dtype);
// The suffix of half.cuh's conversions for a half dtype: "f16" or "bf16" (float_to_f16, round_bf16...).
std::string half_suffix(const std::string& dtype);

// Helpers for node arguments.
bool is_value_ref(const json& arg);
std::string value_ref(const json& arg);
bool is_number(const json& arg);
double number(const json& arg);  // also decodes {"float": "inf"}
// Argument `i` of a node, or kwargs[name], or null when absent.
const json& node_arg(const Node& n, size_t i, const char* name);

}  // namespace fusetune
