#include "cli/layout_suggest.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/cost_profile.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// GPT-2 n_layer 4 n_embd 32 (units embed, h.0..h.3, head), 16 sequences of
// 16 tokens a step.
std::string WriteConfig(const std::string& name, const std::string& engine) {
  const std::string path = TempPath(name);
  std::ofstream(path) << "model { n_layer: 4 n_head: 2 n_embd: 32 vocab_size: 256 seq_len: 16 }\n"
                         "data { train_path: \"train.bin\" batch_size: 16 }\n"
                         "engine { "
                      << engine << " }\n";
  return path;
}

// Every unit F 1 ms, fused backward 2 ms, at a micro-batch of 16 x 16
// tokens; updates free; a dp link of 10 us and 1 GB/s.
CostProfile Profile() {
  CostProfile p;
  p.set_source("profile.pbtxt");
  p.set_tp(1);
  p.set_micro_batch_elements(256);
  for (const char* name : {"embed", "h.0", "h.1", "h.2", "h.3", "head"}) {
    UnitCost* u = p.add_units();
    u->set_name(name);
    u->set_forward_seconds(1e-3);
    u->set_backward_input_seconds(2e-3);
    u->set_recompute_seconds(1e-3);
  }
  LinkCost* dp = p.add_links();
  dp->set_group("dp");
  dp->set_latency_seconds(1e-5);
  dp->set_bytes_per_second(1e9);
  return p;
}

TEST(LayoutSuggestTest, RanksFeasibleLayoutsAndEndsWithTheBestAsFlags) {
  const std::string config = WriteConfig("suggest.pbtxt", "zero { stage: 1 }");
  absl::StatusOr<std::vector<LayoutChoice>> choices = SuggestLayouts(config, {}, 2, Profile());
  ASSERT_TRUE(choices.ok()) << choices.status();
  ASSERT_FALSE(choices->empty());
  const LayoutChoice& best = choices->front();
  ASSERT_TRUE(best.feasible && best.priced) << best.verdict;
  bool saw_tp = false, saw_refused = false;
  for (const LayoutChoice& c : *choices) {
    EXPECT_EQ(c.dp * c.tp * c.pp, 2);
    if (c.feasible && c.priced) {
      EXPECT_LE(best.prediction.step_seconds, c.prediction.step_seconds);
    }
    if (c.tp == 2 && c.feasible) {
      saw_tp = true;
      EXPECT_FALSE(c.priced);
      EXPECT_TRUE(absl::StrContains(c.verdict, "tp collectives not priced (profiled at tp 1)")) << c.verdict;
    }
    if (c.pp == 2 && c.schedule == "ZERO_BUBBLE_H1" && c.micro_batches == 1) {
      saw_refused = true;
      EXPECT_FALSE(c.feasible);
      EXPECT_TRUE(absl::StrContains(c.verdict, "ZERO_BUBBLE_H1 needs engine.gradient_accumulation_steps (1) >= "
                                               "engine.parallel.pp (2)"))
          << c.verdict;
    }
  }
  EXPECT_TRUE(saw_tp);
  EXPECT_TRUE(saw_refused);
  // dp 2 halves each rank's micro-batch: below one rank's 18 ms.
  EXPECT_LT(best.prediction.step_seconds, 18e-3);

  const std::string table = FormatLayoutChoices(*choices);
  std::string flags;
  for (const std::string& s : best.sets) flags += (flags.empty() ? "" : " ") + std::string("--set ") + s;
  EXPECT_TRUE(absl::EndsWith(table, "\nbest: " + flags + "\n")) << table;
  EXPECT_TRUE(absl::StartsWith(table, "| rank | dp | tp | pp | micro-batches | schedule |")) << table;
}

}  // namespace
}  // namespace zeroshard::cli
