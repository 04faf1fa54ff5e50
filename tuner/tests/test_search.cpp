// The search's final (tuner/src/search.cpp): who gets in, and how the rounds are scored.
#include <gtest/gtest.h>

#include "search.h"

using namespace fusetune;

namespace {

json cand(const std::string& name, const std::string& family, double median, const std::string& status = "ok") {
  json c = {{"name", name}, {"family", family}, {"status", status}};
  if (status == "ok") c["time_ms"] = {{"median", median}};
  return c;
}

json run(double median) { return json{{"status", "ok"}, {"time_ms", {{"median", median}}}}; }

}  // namespace

// Each family's fastest within 10% of the fastest first, then the fastest others, at most four;
// failed, early-stopped and slower candidates stay out.
TEST(SearchFinal, PicksEachFamilysFastestThenTheFastestOthers) {
  json stopped = cand("e", "gemm", 1.01);
  stopped["early_stop"] = "slow warm-up";
  const std::vector<json> cs = {cand("a1", "lt", 1.00), cand("a2", "lt", 1.01), cand("a3", "lt", 1.02),
                                cand("a4", "lt", 1.03), cand("t1", "tma", 1.05), cand("g1", "gemm", 1.12),
                                cand("x", "tma", 0.5, "incorrect"), stopped};
  EXPECT_EQ(pick_finalists(cs), (std::vector<std::string>{"a1", "t1", "a2", "a3"}));
  EXPECT_EQ(pick_finalists({cand("a1", "lt", 1.0), cand("t1", "tma", 1.2)}), std::vector<std::string>{"a1"});
  EXPECT_TRUE(pick_finalists({cand("x", "lt", 1.0, "fault")}).empty());
}

// Scores are medians over rounds of time over the round's fastest: a finalist that is faster in
// most rounds wins even where the clocks drop between rounds (its medians over all rounds are
// then about equal); one that failed a round is dropped.
TEST(SearchFinal, ScoresRoundByRound) {
  const std::vector<std::string> f = {"lib", "tma", "bad"};
  std::map<std::string, json> runs;
  const double clock[6] = {1.0, 1.0, 1.15, 1.15, 1.15, 1.0};  // the rounds' slow-down
  for (int r = 0; r < 6; ++r) {
    const std::string round = "#" + std::to_string(r);
    runs["lib" + round] = run(0.80 * clock[r]);
    runs["tma" + round] = run((r == 1 ? 0.81 : 0.78) * clock[r]);
    runs["bad" + round] = r == 3 ? json{{"status", "fault"}} : run(0.5);
  }
  const json out = score_final(f, runs);
  EXPECT_EQ(out["winner"], "tma");
  EXPECT_EQ(out["dropped"]["bad"], "a round did not pass");
  EXPECT_FALSE(out["round_ms"].contains("bad"));
  EXPECT_DOUBLE_EQ(out["score"]["tma"].get<double>(), 1.0);
  EXPECT_NEAR(out["score"]["lib"].get<double>(), 0.80 / 0.78, 1e-12);
  EXPECT_EQ(out["round_ms"]["lib"].size(), 6u);
  // With one finalist left there is no final.
  runs.erase("lib#5");
  EXPECT_TRUE(score_final(f, runs)["winner"].is_null());
}
