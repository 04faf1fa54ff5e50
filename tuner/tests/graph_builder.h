// Test helper: builds graph.json the way tuner/py/fusetune_py/capture.py writes it.
#pragma once
#include <string>
#include <vector>

#include "graph.h"

namespace fusetune {

class GraphBuilder {
 public:
  GraphBuilder& value(const std::string& name, std::vector<int64_t> shape, const std::string& kind = "intermediate",
                      const std::string& dtype = "float32") {
    json v = {{"shape", shape}, {"dtype", dtype}, {"strides", contiguous(shape)}, {"kind", kind}};
    if (kind == "input") v["index"] = inputs_++;
    if (kind == "parameter") v["target"] = name;
    values_[name] = v;
    return *this;
  }
  // Arguments as a std::vector: nlohmann's ordered_json flattens braced lists of one-key objects.
  GraphBuilder& node(const std::string& name, const std::string& op, std::vector<json> args, std::vector<int64_t> shape,
                     json kwargs = json::object()) {
    value(name, shape);
    json a = json::array();
    for (auto& x : args) a.push_back(x);
    json n = json::object();
    n["name"] = name;
    n["op"] = op;
    n["args"] = a;
    n["kwargs"] = kwargs;
    n["source"] = "m.py:3: " + name;
    nodes_.push_back(n);
    return *this;
  }
  Graph build(std::vector<std::string> outputs, const std::string& model_path = "m.py", const std::string& sha = "0") {
    return Graph::from_json({{"format", "fusetune-graph"}, {"version", 1},
                             {"model", {{"path", model_path}, {"sha256", sha}, {"training", true}, {"init_args", json::array()}}},
                             {"values", values_}, {"nodes", nodes_}, {"outputs", outputs}});
  }
  GraphBuilder& model_dtype(const std::string& name, const std::string& dtype) {
    values_[name]["model_dtype"] = dtype;
    return *this;
  }
  GraphBuilder& values_dtype(const std::string& name, const std::string& dtype) {
    values_[name]["dtype"] = dtype;
    return *this;
  }
  static json ref(const std::string& v) {
    json r = json::object();
    r["value"] = v;
    return r;
  }

 private:
  static std::vector<int64_t> contiguous(const std::vector<int64_t>& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int d = (int)s.size() - 2; d >= 0; --d) st[d] = st[d + 1] * s[d + 1];
    return st;
  }
  json values_ = json::object();
  json nodes_ = json::array();
  int inputs_ = 0;
};

}  // namespace fusetune
