// Search spaces: the constraint language, enumeration and the configs/ shipped with fusetune.
#include <gtest/gtest.h>

#include "error.h"
#include "pipeline.h"
#include "space.h"
#include "util.h"

namespace fusetune {
namespace {

TEST(Expression, PrecedenceAndOperators) {
  const std::map<std::string, int64_t> v = {{"A", 6}, {"B", 4}};
  EXPECT_EQ(eval_expression("A + B * 2", v), 14);
  EXPECT_EQ(eval_expression("(A + B) * 2", v), 20);
  EXPECT_EQ(eval_expression("A / B", v), 1);
  EXPECT_EQ(eval_expression("A % B", v), 2);
  EXPECT_EQ(eval_expression("-A + 1", v), -5);
  EXPECT_EQ(eval_expression("A >= 6 && B < 4", v), 0);
  EXPECT_EQ(eval_expression("A >= 6 || B < 4", v), 1);
  EXPECT_EQ(eval_expression("A <= 5", v), 0);
  EXPECT_EQ(eval_expression("A != B", v), 1);
  EXPECT_EQ(eval_expression("!(A == 6)", v), 0);
}

TEST(Expression, Errors) {
  const std::map<std::string, int64_t> v = {{"A", 6}};
  EXPECT_THROW(eval_expression("A / 0", v), Error);
  EXPECT_THROW(eval_expression("C + 1", v), Error);
  EXPECT_THROW(eval_expression("A +", v), Error);
  EXPECT_THROW(eval_expression("(A", v), Error);
  EXPECT_THROW(eval_expression("A A", v), Error);
}

TEST(SearchSpace, EnumeratesGridUnderConstraints) {
  const json j = json::parse(R"({"family": "t", "template": "t.cuh",
      "params": {"X": [1, 2, 4], "Y": [8, 16]}, "constraints": ["X * Y <= 32", "X != 2"]})");
  const SearchSpace s = SearchSpace::from_json(j, "test");
  const auto configs = s.enumerate();
  std::vector<std::string> names;
  for (const auto& c : configs) names.push_back(c.name());
  EXPECT_EQ(names, (std::vector<std::string>{"t_x1_y8", "t_x1_y16", "t_x4_y8"}));
  EXPECT_EQ(configs[2].at("X"), 4);
  EXPECT_EQ(Config::from_json("t", configs[2].to_json()).name(), "t_x4_y8");
}

TEST(SearchSpace, RejectsBadFiles) {
  EXPECT_THROW(SearchSpace::from_json(json::parse(R"({"family": "t", "template": "t.cuh",
      "params": {"X": []}})"), "test"), UserError);
  EXPECT_THROW(SearchSpace::from_json(json::parse(R"({"family": "t", "template": "t.cuh",
      "params": {"X": [1]}, "constraints": ["Z > 1"]})"), "test"), UserError);
  EXPECT_THROW(SearchSpace::from_json(json::parse(R"({"template": "t.cuh", "params": {}})"), "test"), UserError);
}

TEST(SearchSpace, ShippedConfigsAreValid) {
  const std::string dir = path_join(fusetune_home(), "configs");
  const auto files = list_files(dir, ".json");
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    const SearchSpace s = SearchSpace::load(path_join(dir, f));
    EXPECT_EQ(s.family + ".json", f);
    EXPECT_TRUE(file_exists(path_join(path_join(fusetune_home(), "templates"), s.template_file))) << f;
    const auto configs = s.enumerate();
    EXPECT_GE(configs.size(), 2u) << f;  // a space offers a choice
    for (const auto& c : configs) {
      std::map<std::string, int64_t> vars;
      for (const auto& [k, v] : c.params) vars[k] = v;
      for (const auto& expr : s.constraints) EXPECT_NE(eval_expression(expr, vars), 0) << c.name() << " " << expr;
    }
  }
}

TEST(Util, Sha256MatchesKnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace fusetune
