// Search spaces: a family's parameter grid and constraints, read from configs/<family>.json, and
// the one config type that names a candidate everywhere (cache, journal, best.json, extension).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "json.h"

namespace fusetune {

struct Config {
  std::string family;
  std::vector<std::pair<std::string, int64_t>> params;  // in the space's declared order

  int64_t at(const std::string& name) const;
  // Procedural name: family then each parameter lower-cased with its value,
  // e.g. gemm_bm64_bn64_bk8_tm4_tn4.
  std::string name() const;
  json to_json() const;  // {"BM": 64, ...}
  static Config from_json(const std::string& family, const json& params);
};

struct SearchSpace {
  std::string family;
  std::string template_file;
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  std::vector<std::string> constraints;

  static SearchSpace load(const std::string& path);
  static SearchSpace from_json(const json& j, const std::string& origin);
  // Every grid point that satisfies all constraints, in grid order.
  std::vector<Config> enumerate() const;
};

// Evaluates an integer expression over named variables: + - * / % ( ), comparisons,
// && || !. Division or modulo by zero and unknown names are errors.
int64_t eval_expression(const std::string& expr, const std::map<std::string, int64_t>& vars);

}  // namespace fusetune
