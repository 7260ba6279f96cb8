#include "data/batch_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Tokens whose value encodes their position, so every row can be traced back.
TokenDataset PositionalDataset(int64_t n) {
  std::vector<uint16_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<uint16_t>(i);
  return TokenDataset::FromTokens(std::move(t), 65536).value();
}

TEST(BatchPlanTest, ValidateNamesTheMismatch) {
  BatchPlan p{12, 2, 4, 8};
  absl::Status s = p.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("batch_size 12 is not a multiple of dp * accumulation_steps = 2 * 4 = 8"),
            std::string::npos)
      << s;
  EXPECT_EQ((BatchPlan{8, 0, 1, 8}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((BatchPlan{8, 1, 1, 0}).Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((BatchPlan{16, 2, 4, 8}).Validate().ok());
  EXPECT_EQ((BatchPlan{16, 2, 4, 8}).micro_batch_size(), 2);
}

TEST(BatchPlanTest, SlotFormulaIsABijection) {
  const BatchPlan p{24, 3, 2, 5};
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  for (int64_t j = 0; j < p.batch_size; ++j) {
    const MicroBatchSlot s = SlotOfSequence(p, j);
    EXPECT_LT(s.micro_index, 2);
    EXPECT_LT(s.dp_rank, 3);
    EXPECT_LT(s.row, 4);
    EXPECT_EQ(SequenceOfSlot(p, s.micro_index, s.dp_rank, s.row), j);
    seen.insert({s.micro_index, s.dp_rank, s.row});
  }
  EXPECT_EQ(seen.size(), 24u);
  // The documented example: j = m*dp*B + r*B + b.
  const MicroBatchSlot s = SlotOfSequence(p, 17);  // 17 = 1*12 + 1*4 + 1
  EXPECT_EQ(s.micro_index, 1);
  EXPECT_EQ(s.dp_rank, 1);
  EXPECT_EQ(s.row, 1);
}

TEST(BatchPlanTest, UnshuffledWindowsAreContiguousAndOverlapByOneToken) {
  const TokenDataset ds = PositionalDataset(1000);
  auto src = BatchSource::Create(&ds, BatchPlan{4, 2, 1, 10});
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->num_windows(), 99);  // (1000 - 1) / 10
  std::vector<int32_t> tokens(2 * 11, -1);
  // Step 3, rank 1: sequences 3*4 + 2 = 14 and 15.
  ASSERT_TRUE(src->GetMicroBatch(3, 0, 1, absl::MakeSpan(tokens)).ok());
  for (int t = 0; t < 11; ++t) {
    EXPECT_EQ(tokens[t], 140 + t);
    EXPECT_EQ(tokens[11 + t], 150 + t);
  }
  std::vector<int32_t> in(20, -1), tg(20, -1);
  ASSERT_TRUE(src->GetInputsTargets(3, 0, 1, absl::MakeSpan(in), absl::MakeSpan(tg)).ok());
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(in[t], 140 + t);
    EXPECT_EQ(tg[t], 141 + t);
    EXPECT_EQ(in[10 + t], 150 + t);
    EXPECT_EQ(tg[10 + t], 151 + t);
  }
}

TEST(BatchPlanTest, WrapsToANewEpochAfterTheLastWindow) {
  const TokenDataset ds = PositionalDataset(31);  // 3 windows of 10 + 1
  auto src = BatchSource::Create(&ds, BatchPlan{2, 1, 1, 10});
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->WindowStart(2), 20);
  EXPECT_EQ(src->WindowStart(3), 0);
  EXPECT_EQ(src->WindowStart(7), 10);
}

// The same step sees the same multiset of sequences under any split.
std::map<int64_t, int> SequencesOfStep(const TokenDataset& ds, BatchPlan plan, int64_t step) {
  auto src = BatchSource::Create(&ds, plan).value();
  std::map<int64_t, int> starts;
  const int64_t b = plan.micro_batch_size();
  std::vector<int32_t> tokens(static_cast<size_t>(b * (plan.seq_len + 1)));
  for (int64_t m = 0; m < plan.accumulation_steps; ++m) {
    for (int64_t r = 0; r < plan.dp; ++r) {
      EXPECT_TRUE(src.GetMicroBatch(step, m, r, absl::MakeSpan(tokens)).ok());
      for (int64_t row = 0; row < b; ++row) ++starts[tokens[row * (plan.seq_len + 1)]];
    }
  }
  return starts;
}

TEST(BatchPlanTest, AnyDpAndAccumulationSplitSeesTheSameSequences) {
  const TokenDataset ds = PositionalDataset(5000);
  const uint64_t seed = TestSeed() | 1u;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  for (int64_t step : {0, 1, 7, 40}) {
    const auto reference = SequencesOfStep(ds, BatchPlan{8, 1, 1, 16, seed}, step);
    EXPECT_EQ(reference.size(), 8u);
    for (auto [dp, acc] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {4, 2}, {1, 8}, {8, 1}, {2, 4}}) {
      EXPECT_EQ(SequencesOfStep(ds, BatchPlan{8, dp, acc, 16, seed}, step), reference)
          << "dp " << dp << " acc " << acc << " step " << step;
    }
  }
}

TEST(BatchPlanTest, ShuffleIsAPermutationPerEpochAndDependsOnSeed) {
  const TokenDataset ds = PositionalDataset(1001);  // 100 windows of 10 + 1
  auto a = BatchSource::Create(&ds, BatchPlan{1, 1, 1, 10, 42}).value();
  auto b = BatchSource::Create(&ds, BatchPlan{1, 1, 1, 10, 43}).value();
  std::set<int64_t> epoch0, epoch1;
  std::vector<int64_t> order_a, order_b, order_a1;
  for (int64_t g = 0; g < 100; ++g) {
    order_a.push_back(a.WindowStart(g));
    order_b.push_back(b.WindowStart(g));
    epoch0.insert(order_a.back());
  }
  for (int64_t g = 100; g < 200; ++g) {
    order_a1.push_back(a.WindowStart(g));
    epoch1.insert(order_a1.back());
  }
  EXPECT_EQ(epoch0.size(), 100u);
  EXPECT_EQ(epoch1.size(), 100u);
  EXPECT_EQ(*epoch0.rbegin(), 990);
  EXPECT_NE(order_a, order_b);
  EXPECT_NE(order_a, order_a1);
  // Deterministic: a fresh source repeats the order, also when revisiting epoch 0.
  auto again = BatchSource::Create(&ds, BatchPlan{1, 1, 1, 10, 42}).value();
  EXPECT_EQ(again.WindowStart(150), order_a1[50]);
  EXPECT_EQ(again.WindowStart(5), order_a[5]);
}

TEST(BatchPlanTest, RejectsBadIndicesAndTooSmallDatasets) {
  const TokenDataset ds = PositionalDataset(100);
  auto src = BatchSource::Create(&ds, BatchPlan{4, 2, 2, 8}).value();
  std::vector<int32_t> tokens(9);
  EXPECT_EQ(src.GetMicroBatch(0, 2, 0, absl::MakeSpan(tokens)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(src.GetMicroBatch(0, 0, 2, absl::MakeSpan(tokens)).code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> wrong(10);
  absl::Status s = src.GetMicroBatch(0, 0, 0, absl::MakeSpan(wrong));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("holds 10 ints, expected B*(T+1) = 9"), std::string::npos) << s;

  const TokenDataset tiny = PositionalDataset(8);
  auto bad = BatchSource::Create(&tiny, BatchPlan{1, 1, 1, 8});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("holds 8 tokens, fewer than one sequence of seq_len + 1 = 9"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace zeroshard
