// A small GPT-2 trained on one rank on the generated corpus must drive the
// loss well below the corpus's unigram entropy (the best loss without context).
#include "core/testing/test_seed.h"
#include "examples/train_single_rank_loop.h"

#include <cmath>
#include <cstdio>

#include "data/byte_tokens.h"
#include "data/english_like_corpus.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

double UnigramEntropyNats(absl::Span<const uint16_t> tokens, int vocab) {
  std::vector<double> counts(vocab, 0.0);
  for (uint16_t t : tokens) counts[t] += 1;
  double h = 0;
  for (double c : counts) {
    if (c > 0) h -= c / tokens.size() * std::log(c / tokens.size());
  }
  return h;
}

TEST(TrainSingleRankTest, LossDropsWellBelowUnigramEntropy) {
  const uint64_t corpus_seed = TestSeed() | 1u;
  SCOPED_TRACE(::testing::Message() << "corpus seed " << corpus_seed);
  auto dataset = TokenDataset::FromTokens(BytesToTokens(GenerateEnglishLikeText(corpus_seed, 400000)), 256);
  ASSERT_TRUE(dataset.ok());
  const double entropy = UnigramEntropyNats(dataset->tokens(), 256);

  SingleRankTrainOptions opt;
  opt.model = Gpt2Config{2, 4, 64, 256, 32};
  opt.seq_len = 32;
  opt.batch_size = 8;
  opt.steps = 600;
  // Constant 1e-3 after warmup: higher rates (or decaying early) leave some
  // seeds on the unigram plateau (~3 nats) for hundreds of steps.
  opt.lr = 1e-3f;
  opt.warmup_steps = 20;
  opt.final_lr_fraction = 1.0f;
  opt.num_threads = 1;  // small GEMMs: one thread is fastest and immune to a busy machine
  opt.shuffle_seed = corpus_seed;
  opt.init_seed = corpus_seed;
  auto losses = TrainSingleRank(*dataset, opt);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(losses->size(), 600u);
  auto mean = [&](int64_t from, int64_t to) {
    double s = 0;
    for (int64_t i = from; i < to; ++i) s += (*losses)[i];
    return s / (to - from);
  };
  const double start = (*losses)[0], middle = mean(290, 310), end = mean(580, 600);
  std::printf("unigram entropy %.3f nats; loss start %.3f, steps 290-309 %.3f, steps 580-599 %.3f\n", entropy, start,
              middle, end);
  EXPECT_NEAR(start, std::log(256.0), 0.1);  // uniform at init
  EXPECT_LT(end, 0.6 * entropy) << "entropy " << entropy;
  EXPECT_LT(end, middle);
}

TEST(TrainSingleRankTest, WarmupThenCosineDecay) {
  SingleRankTrainOptions opt;
  opt.lr = 1.0f;
  opt.warmup_steps = 4;
  opt.steps = 15;  // decay over steps 4..14
  opt.final_lr_fraction = 0.1f;
  EXPECT_FLOAT_EQ(ScheduledLearningRate(opt, 0), 0.25f);
  EXPECT_FLOAT_EQ(ScheduledLearningRate(opt, 3), 1.0f);
  EXPECT_FLOAT_EQ(ScheduledLearningRate(opt, 4), 1.0f);
  EXPECT_NEAR(ScheduledLearningRate(opt, 9), 0.55f, 1e-6);  // halfway: 0.1 + 0.9 * 0.5
  EXPECT_NEAR(ScheduledLearningRate(opt, 14), 0.1f, 1e-6);
}

TEST(TrainSingleRankTest, RejectsVocabMismatch) {
  auto dataset = TokenDataset::FromTokens(std::vector<uint16_t>(100, 1), 128).value();
  SingleRankTrainOptions opt;
  opt.model = Gpt2Config{1, 1, 8, 256, 8};
  opt.seq_len = 8;
  auto losses = TrainSingleRank(dataset, opt);
  EXPECT_EQ(losses.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(losses.status().message(), "dataset vocab_size 128 differs from the model's 256");
}

}  // namespace
}  // namespace zeroshard
