// Loading of the captured graph and helpers to read node arguments.
#include "graph.h"

#include <algorithm>
#include <limits>

#include "error.h"
#include "util.h"

namespace fusetune {

int64_t ValueInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Graph Graph::load(const std::string& path) {
  try {
    return from_json(json::parse(read_file(path)));
  } catch (const json::exception& e) {
    FT_USER_ERROR("malformed graph file " + path + ": " + e.what());
  }
}

Graph Graph::from_json(const json& j) {
  if (j.value("format", "") != "fusetune-graph" || j.value("version", 0) != 1)
    FT_USER_ERROR("not a fusetune graph file of version 1");
  Graph g;
  const json& m = j.at("model");
  g.model_path = m.at("path").get<std::string>();
  g.model_sha256 = m.at("sha256").get<std::string>();
  g.training = m.value("training", false);
  g.init_args = m.value("init_args", json::array());
  g.init_signature = m.value("init_signature", json{{"def", "(self, *args)"}, {"call", "*args"}});
  g.state_attributes = m.value("state_attributes", std::vector<std::string>{});
  g.torch_version = j.value("torch_version", "");
  if (j.contains("libraries") && j.at("libraries").value("cublaslt", json()).is_string())
    g.cublaslt_path = j.at("libraries").at("cublaslt").get<std::string>();
  if (j.contains("libraries") && j.at("libraries").value("cudnn", json()).is_string())
    g.cudnn_path = j.at("libraries").at("cudnn").get<std::string>();
  g.seed = j.value("seed", 0);
  for (const auto& [name, v] : j.at("values").items()) {
    ValueInfo info;
    info.name = name;
    info.kind = v.value("kind", "intermediate");
    if (info.kind != "tuple") {
      info.shape = v.at("shape").get<std::vector<int64_t>>();
      info.strides = v.at("strides").get<std::vector<int64_t>>();
      info.dtype = v.at("dtype").get<std::string>();
      info.model_dtype = v.value("model_dtype", info.dtype);
    }
    info.index = v.value("index", -1);
    if (info.kind == "scalar_input") info.scalar = v.at("value");
    info.target = v.value("target", "");
    g.values.emplace(name, std::move(info));
  }
  for (const auto& n : j.at("nodes")) {
    g.nodes.push_back(Node{n.at("name").get<std::string>(), n.at("op").get<std::string>(), n.at("args"),
                           n.value("kwargs", json::object()), n.value("source", "")});
  }
  g.outputs = j.at("outputs").get<std::vector<std::string>>();
  g.mutations = j.value("mutations", json::array());
  return g;
}

const ValueInfo& Graph::value(const std::string& name) const {
  const auto it = values.find(name);
  if (it == values.end()) FT_USER_ERROR("graph has no value named " + name);
  return it->second;
}

std::vector<const ValueInfo*> Graph::inputs() const {
  std::vector<const ValueInfo*> in;
  for (const auto& [name, v] : values)
    if (v.kind == "input" || v.kind == "scalar_input") in.push_back(&v);
  std::sort(in.begin(), in.end(), [](auto* a, auto* b) { return a->index < b->index; });
  return in;
}

bool is_value_ref(const json& arg) { return arg.is_object() && arg.contains("value"); }

std::string value_ref(const json& arg) { return arg.at("value").get<std::string>(); }

bool is_number(const json& arg) {
  return arg.is_number() || arg.is_boolean() || (arg.is_object() && arg.contains("float"));
}

double number(const json& arg) {
  if (arg.is_boolean()) return arg.get<bool>() ? 1.0 : 0.0;
  if (arg.is_number()) return arg.get<double>();
  if (arg.is_object() && arg.contains("float")) {
    const std::string s = arg.at("float").get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  FT_THROW("argument is not a number: " + arg.dump());
}

const json& node_arg(const Node& n, size_t i, const char* name) {
  static const json null_arg;
  if (i < n.args.size()) return n.args[i];
  if (name && n.kwargs.contains(name)) return n.kwargs.at(name);
  return null_arg;
}

bool is_half(const std::string& dtype) { return dtype == "float16" || dtype == "bfloat16"; }
int half_kind(const std::string& dtype) { return dtype == "float16" ? 1 : dtype == "bfloat16" ? 2 : 0; }
std::string half_suffix(const std::string& dtype) { return dtype == "float16" ? "f16" : "bf16"; }

}  // namespace fusetune
