// Search spaces: parameter grids with constraints, and the candidate config type.
#include "space.h"

#include <cctype>

#include "error.h"
#include "util.h"

namespace fusetune {

int64_t Config::at(const std::string& name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  FT_THROW("config " + this->name() + " has no parameter " + name);
}

std::string Config::name() const {
  std::string n = family;
  for (const auto& [k, v] : params) {
    n += "_";
    for (char c : k) n.push_back((char)std::tolower((unsigned char)c));
    n += std::to_string(v);
  }
  return n;
}

json Config::to_json() const {
  json j = json::object();
  for (const auto& [k, v] : params) j[k] = v;
  return j;
}

Config Config::from_json(const std::string& family, const json& params) {
  Config c{family, {}};
  for (const auto& [k, v] : params.items()) c.params.emplace_back(k, v.get<int64_t>());
  return c;
}

SearchSpace SearchSpace::load(const std::string& path) {
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    FT_USER_ERROR("cannot parse " + path + ": " + e.what());
  }
  return from_json(j, path);
}

SearchSpace SearchSpace::from_json(const json& j, const std::string& origin) {
  SearchSpace s;
  try {
    s.family = j.at("family").get<std::string>();
    s.template_file = j.at("template").get<std::string>();
    for (const auto& [k, v] : j.at("params").items()) {
      if (!v.is_array() || v.empty()) FT_USER_ERROR(origin + ": parameter " + k + " needs a non-empty list");
      s.params.emplace_back(k, v.get<std::vector<int64_t>>());
    }
    if (j.contains("constraints")) s.constraints = j.at("constraints").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    FT_USER_ERROR(origin + ": " + e.what());
  }
  for (const auto& c : s.constraints) {  // fail on a typo now, not deep inside a search
    std::map<std::string, int64_t> probe;
    for (const auto& [k, v] : s.params) probe[k] = v.front();
    try {
      eval_expression(c, probe);
    } catch (const Error& e) {
      if (std::string(e.what()).find("by zero") == std::string::npos)
        FT_USER_ERROR(origin + ": constraint '" + c + "': " + e.what());
    }
  }
  return s;
}

std::vector<Config> SearchSpace::enumerate() const {
  std::vector<Config> out;
  std::vector<size_t> pos(params.size(), 0);
  while (true) {
    Config c{family, {}};
    std::map<std::string, int64_t> vars;
    for (size_t i = 0; i < params.size(); ++i) {
      c.params.emplace_back(params[i].first, params[i].second[pos[i]]);
      vars[params[i].first] = params[i].second[pos[i]];
    }
    bool ok = true;
    for (const auto& expr : constraints) {
      try {
        ok = ok && eval_expression(expr, vars) != 0;
      } catch (const Error&) {
        ok = false;  // e.g. a division by zero for this point: it cannot be a valid config
      }
    }
    if (ok) out.push_back(std::move(c));
    size_t i = params.size();
    while (i > 0) {
      --i;
      if (++pos[i] < params[i].second.size()) break;
      pos[i] = 0;
      if (i == 0) return out;
    }
    if (params.empty()) return out;
  }
}

namespace {

// Recursive-descent parser; precedence from low to high: || && (== !=) (< <= > >=) (+ -) (* / %) unary.
class Parser {
 public:
  Parser(const std::string& s, const std::map<std::string, int64_t>& vars) : s_(s), vars_(vars) {}

  int64_t parse() {
    const int64_t v = parse_or();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + s_.substr(i_) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) { FT_THROW("expression '" + s_ + "': " + msg); }
  void skip() {
    while (i_ < s_.size() && std::isspace((unsigned char)s_[i_])) ++i_;
  }
  bool eat(const char* tok) {
    skip();
    const size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(i_, n, tok) != 0) return false;
    // "<" must not eat the start of "<=", "!" not the start of "!=".
    if (n == 1 && i_ + 1 < s_.size() && s_[i_ + 1] == '=' && (tok[0] == '<' || tok[0] == '>' || tok[0] == '!'))
      return false;
    i_ += n;
    return true;
  }
  int64_t parse_or() {
    int64_t v = parse_and();
    while (eat("||")) { const int64_t r = parse_and(); v = (v || r); }
    return v;
  }
  int64_t parse_and() {
    int64_t v = parse_eq();
    while (eat("&&")) { const int64_t r = parse_eq(); v = (v && r); }
    return v;
  }
  int64_t parse_eq() {
    int64_t v = parse_rel();
    while (true) {
      if (eat("==")) v = (v == parse_rel());
      else if (eat("!=")) v = (v != parse_rel());
      else return v;
    }
  }
  int64_t parse_rel() {
    int64_t v = parse_add();
    while (true) {
      if (eat("<=")) v = (v <= parse_add());
      else if (eat(">=")) v = (v >= parse_add());
      else if (eat("<")) v = (v < parse_add());
      else if (eat(">")) v = (v > parse_add());
      else return v;
    }
  }
  int64_t parse_add() {
    int64_t v = parse_mul();
    while (true) {
      if (eat("+")) v += parse_mul();
      else if (eat("-")) v -= parse_mul();
      else return v;
    }
  }
  int64_t parse_mul() {
    int64_t v = parse_unary();
    while (true) {
      if (eat("*")) { v *= parse_unary(); continue; }
      const bool div = eat("/");
      if (!div && !eat("%")) return v;
      const int64_t r = parse_unary();
      if (r == 0) fail("division by zero");
      v = div ? v / r : v % r;
    }
  }
  int64_t parse_unary() {
    if (eat("-")) return -parse_unary();
    if (eat("!")) return !parse_unary();
    if (eat("(")) {
      const int64_t v = parse_or();
      if (!eat(")")) fail("missing ')'");
      return v;
    }
    skip();
    const size_t start = i_;
    if (i_ < s_.size() && std::isdigit((unsigned char)s_[i_])) {
      while (i_ < s_.size() && std::isdigit((unsigned char)s_[i_])) ++i_;
      return std::stoll(s_.substr(start, i_ - start));
    }
    while (i_ < s_.size() && (std::isalnum((unsigned char)s_[i_]) || s_[i_] == '_')) ++i_;
    if (start == i_) fail(i_ < s_.size() ? "unexpected '" + s_.substr(i_) + "'" : "unexpected end");
    const std::string name = s_.substr(start, i_ - start);
    const auto it = vars_.find(name);
    if (it == vars_.end()) fail("unknown name '" + name + "'");
    return it->second;
  }

  const std::string& s_;
  const std::map<std::string, int64_t>& vars_;
  size_t i_ = 0;
};

}  // namespace

int64_t eval_expression(const std::string& expr, const std::map<std::string, int64_t>& vars) {
  return Parser(expr, vars).parse();
}

}  // namespace fusetune
