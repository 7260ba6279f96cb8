#include "cli/check_config.h"

#include <cstdlib>
#include <fstream>

#include "cli/run_config.h"
#include "gtest/gtest.h"
#include "kernels/context.h"

namespace zeroshard::cli {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CheckConfigTest, SummaryStatesTheBatchSplit) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(
      WriteTemp("gpt2.pbtxt", R"pb(model { n_layer: 1 n_head: 1 n_embd: 4 vocab_size: 8 seq_len: 2 }
                                   data { train_path: "t.bin" batch_size: 8 }
                                   engine { parallel { dp: 2 } gradient_accumulation_steps: 2 zero { stage: 2 } })pb"),
      {}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string s = ConfigSummary(*c, 2);
  EXPECT_NE(s.find("valid config for 2 ranks\n"), std::string::npos) << s;
  EXPECT_NE(s.find("kind       gpt2 (zeroshard.TrainConfig)\n"), std::string::npos) << s;
  const kernels::CpuBlasInfo blas = kernels::DescribeCpuBlas();
  EXPECT_NE(s.find("cpu        " + blas.library + ", " + blas.core + " kernels, "), std::string::npos) << s;
  EXPECT_NE(s.find("batch      8 sequences/step = dp 2 x accumulation 2 x micro-batch 2; 16 tokens/step\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("zero       stage 2, prefetch 1"), std::string::npos) << s;
  EXPECT_NE(s.find("model      GPT-2 n_layer=1 n_head=1 n_embd=4 vocab_size=8 seq_len=2: 292 parameters\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("training   100 steps, eval every 0, train data t.bin\n"), std::string::npos) << s;
}

TEST(CheckConfigTest, SummaryOfAClassifierConfig) {
  constexpr char kText[] = R"pb(# proto-message: zeroshard.ClassifierTrainConfig
    model { input_dim: 4 projection_dim: 8 hidden: 6 num_classes: 3 }
    data { batch_size: 12 train_examples: 100 eval_examples: 30 seed: 5 }
    steps: 7
    engine { parallel { dp: 3 } gradient_accumulation_steps: 2 zero { stage: 3 } })pb";
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("classifier.pbtxt", kText), {}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string s = ConfigSummary(*c, 3);
  EXPECT_NE(s.find("kind       classifier (zeroshard.ClassifierTrainConfig)\n"), std::string::npos) << s;
  // 4*8 frozen; 8*6 + 6 and 6*3 + 3 trainable.
  EXPECT_NE(s.find("model      classifier input_dim=4 projection_dim=8 (frozen) hidden=[6] num_classes=3: 107 "
                   "parameters, 75 trainable\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("batch      12 examples/step = dp 3 x accumulation 2 x micro-batch 2\n"), std::string::npos) << s;
  EXPECT_NE(s.find("training   7 steps, 100 generated training examples (seed 5, 0 unlabeled), 30 held out\n"),
            std::string::npos)
      << s;
}

// GPT-2 n_layer 1, C 4, V 8, T 2 (292 parameters, 352 with each unit's
// shard padding) at stage 2 over dp 2, f32, AdamW, one kernel thread: the
// state rows are the engine's allocations (params P·4, master, grads and
// each AdamW kind S·4), the untracked row 96 MiB + 32 MiB per thread.
constexpr char kPlanned[] = R"pb(model { n_layer: 1 n_head: 1 n_embd: 4 vocab_size: 8 seq_len: 2 }
                                  data { train_path: "t.bin" batch_size: 8 }
                                  engine {
                                    parallel { dp: 2 }
                                    gradient_accumulation_steps: 2
                                    zero { stage: 2 }
                                    device { threads_per_rank: 1 }
                                  })pb";

TEST(CheckConfigTest, MemoryPlanPerRank) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("planned.pbtxt", kPlanned), {}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string report;
  ASSERT_TRUE(MemoryPlanReport(*c, 2, int64_t{1} << 30, &report).ok());
  EXPECT_EQ(report,
            "ranks 0, 1:\n"
            "  category                bytes       device         host         nvme  tier\n"
            "  params                   1408         1408            0            0  DEVICE\n"
            "  master_weights            704          704            0            0  DEVICE\n"
            "  grads                     704          704            0            0  DEVICE\n"
            "  optimizer_state          1408         1408            0            0  DEVICE\n"
            "  step_grads               1408         1408            0            0  DEVICE\n"
            "  gathered_units              0            0            0            0  DEVICE\n"
            "  activations              1472         1472            0            0  DEVICE\n"
            "  comm_buffers             2112         2112            0            0  DEVICE\n"
            "  offload_staging             0            0            0            0  HOST\n"
            "  untracked           134217728            0    134217728            0  HOST\n"
            "  total               134226944         9216    134217728            0\n"
            "  resident peak 134226944 (128.01 MiB), nvme files 0 (0 B), limit 1073741824 (1.00 GiB)\n");
}

TEST(CheckConfigTest, MemoryPlanOverTheLimitIsRefused) {
  absl::StatusOr<RunConfig> c = LoadRunConfig(WriteTemp("planned.pbtxt", kPlanned), {}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  std::string report;
  const absl::Status s = MemoryPlanReport(*c, 2, 64 << 20, &report);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // The floor carries the staging pool that offloading adds (buffer_count
  // unset: at least 2 x 64 MiB), the store's bounce buffer (one chunk of
  // master and AdamW state: 21.33 MiB), a checkpoint's one-region copy and
  // the two grad staging buffers of the gradients on NVMe.
  EXPECT_EQ(std::string(s.message()),
            "memory plan exceeds the limit: the limit is below the plan's floor (every state class offloaded: 277.36 "
            "MiB); rank 0 needs 128.01 MiB resident, limit 64.00 MiB; largest: untracked 128.00 MiB, comm_buffers "
            "2.06 KiB, activations 1.44 KiB");
}

}  // namespace
}  // namespace zeroshard::cli
