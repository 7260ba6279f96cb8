// Selective activation checkpointing (docs/activation_checkpointing.md) of
// the sharding engine on GPT-2 tiny under mpirun (_np1 and _np2):
//   * selective: true gives bitwise the losses and weights of policy NONE
//     and of full checkpointing (EVERY_UNIT) after 4 steps of 2
//     micro-batches, at ZeRO 0 and 3, f32 and bf16, with every block's peak
//     share 6·N·C elements lower than without checkpointing;
//   * with EVERY_KTH and NAMED it checkpoints the units the policy names
//     selectively instead of fully, still bitwise;
//   * NAMED naming a unit without a selective form is refused.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/shared_seed.h"
#include "engine/testing/tiny_gpt2.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 8;
constexpr int kAccumulation = 2;
constexpr int kSteps = 4;
constexpr int kLayers = 4;  // units embed, h.0 ... h.3, head

struct Spec {
  int stage = 0;
  DTypeProto compute = F32;
  ActivationCheckpointingConfig::Policy policy = ActivationCheckpointingConfig::NONE;
  bool selective = false;
  int k = 2;
  std::vector<std::string> named;
  std::string Name() const {
    return absl::StrCat("stage ", stage, " ", DTypeProto_Name(compute), " ",
                        ActivationCheckpointingConfig::Policy_Name(policy), selective ? " selective" : "");
  }
};

ProcessGrid& Grid() { return DataParallelWorld(); }

EngineConfig MakeConfig(const Spec& s) {
  EngineConfig c;
  c.mutable_zero()->set_stage(s.stage);
  c.mutable_zero()->set_bucket_bytes(8192);
  c.mutable_parallel()->set_dp(Grid().dp().size());
  c.set_gradient_accumulation_steps(kAccumulation);
  c.mutable_optimizer()->set_lr(3e-3);
  c.mutable_optimizer()->set_eps(1e-6);
  c.mutable_optimizer()->set_weight_decay(0.1);
  c.mutable_optimizer()->set_grad_clip(1.0);
  c.mutable_device()->set_threads_per_rank(1);
  c.mutable_precision()->set_compute_dtype(s.compute);
  ActivationCheckpointingConfig* ac = c.mutable_activation_checkpointing();
  ac->set_policy(s.policy);
  ac->set_selective(s.selective);
  ac->set_k(s.k);
  for (const std::string& u : s.named) ac->add_units(u);
  c.set_seed(5);
  return c;
}

absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(const Spec& s) {
  return Engine::Create(MakeConfig(s), &Grid(), BuildGpt2(TinyGpt2(kLayers)).value());
}

struct TrainedRun {
  std::vector<float> losses;
  int64_t activations_peak = 0;
  std::map<std::string, std::vector<float>> weights;
  std::vector<bool> checkpointed, selective;
};

TrainedRun Train(const Spec& s, const std::vector<int32_t>& tokens) {
  TrainedRun run;
  auto engine = MakeEngine(s);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  run.checkpointed = (*engine)->checkpointed_units();
  run.selective = (*engine)->selective_units();
  std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, TinyGpt2().seq_len, Grid().dp().size(),
                                                       kAccumulation, Grid().dp_rank());
  const std::vector<Batch> views = Views(batches);
  for (int i = 0; i < kSteps; ++i) {
    (*engine)->memory().ResetPeaks();
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(views);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.activations_peak = std::max(run.activations_peak, (*engine)->memory().Usage(MemoryCategory::kActivations).peak);
    run.losses.push_back(r->loss);
  }
  for (const std::string& name : (*engine)->ParamNames()) {
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) run.weights[name] = std::move(*w);
  }
  return run;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void ExpectSameTraining(const TrainedRun& run, const TrainedRun& ref, const std::string& what) {
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kSteps)) << what;
  EXPECT_TRUE(BitwiseEqual(run.losses, ref.losses)) << what;
  ASSERT_EQ(run.weights.size(), ref.weights.size()) << what;
  for (const auto& [name, w] : ref.weights) EXPECT_TRUE(BitwiseEqual(run.weights.at(name), w)) << what << " " << name;
}

std::vector<int32_t> SharedTokens(int32_t* seed) {
  *seed = SharedTestSeed(Grid().dp());
  return RandomTokens(static_cast<uint32_t>(*seed), kGlobalBatch, TinyGpt2().seq_len, TinyGpt2().vocab_size);
}

TEST(SelectiveCheckpointingMpiTest, BitwiseEqualToNoneAndToFullCheckpointing) {
  int32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  // Tokens per micro-batch on this rank.
  const int64_t n = static_cast<int64_t>(kGlobalBatch / Grid().dp().size() / kAccumulation) * TinyGpt2().seq_len;
  const int64_t c = TinyGpt2().n_embd;
  for (const auto& [stage, dtype] : std::vector<std::pair<int, DTypeProto>>{{0, F32}, {3, F32}, {3, BF16}}) {
    Spec none;
    none.stage = stage;
    none.compute = dtype;
    Spec selective = none, full = none;
    selective.selective = true;
    full.policy = ActivationCheckpointingConfig::EVERY_UNIT;
    const TrainedRun ref = Train(none, tokens);
    const TrainedRun sel = Train(selective, tokens);
    const TrainedRun all = Train(full, tokens);
    ExpectSameTraining(sel, ref, selective.Name());
    ExpectSameTraining(all, ref, full.Name());
    EXPECT_EQ(sel.selective, (std::vector<bool>{false, true, true, true, true, false})) << selective.Name();
    EXPECT_EQ(sel.checkpointed, std::vector<bool>(kLayers + 2, false)) << selective.Name();
    // The peak (the head's, every block's activations of the micro-batch
    // still held) drops by the 6·N·C elements each block no longer keeps.
    const int64_t e = dtype == F32 ? 4 : 2;
    EXPECT_EQ(ref.activations_peak - sel.activations_peak, kLayers * 6 * n * c * e)
        << selective.Name() << ": peak " << sel.activations_peak << " vs " << ref.activations_peak;
  }
}

TEST(SelectiveCheckpointingMpiTest, ComposesWithEveryKthAndNamed) {
  int32_t seed = 0;
  const std::vector<int32_t> tokens = SharedTokens(&seed);
  SCOPED_TRACE(absl::StrCat("token seed ", seed));
  Spec none;
  none.stage = 3;
  const TrainedRun ref = Train(none, tokens);
  struct Case {
    ActivationCheckpointingConfig::Policy policy;
    std::vector<std::string> named;
    std::vector<bool> selective;  // embed, h.0, h.1, h.2, h.3, head
  };
  const std::vector<Case> cases = {
      // Units 0, 2, 4: embed (no selective form: keeps its nothing), h.1, h.3.
      {ActivationCheckpointingConfig::EVERY_KTH, {}, {false, false, true, false, true, false}},
      {ActivationCheckpointingConfig::EVERY_UNIT, {}, {false, true, true, true, true, false}},
      {ActivationCheckpointingConfig::NAMED, {"h.0", "h.2"}, {false, true, false, true, false, false}},
  };
  for (const Case& c : cases) {
    Spec s = none;
    s.policy = c.policy;
    s.named = c.named;
    s.selective = true;
    const TrainedRun run = Train(s, tokens);
    EXPECT_EQ(run.selective, c.selective) << s.Name();
    EXPECT_EQ(run.checkpointed, std::vector<bool>(kLayers + 2, false)) << s.Name();
    ExpectSameTraining(run, ref, s.Name());
    EXPECT_LT(run.activations_peak, ref.activations_peak) << s.Name();
  }
}

TEST(SelectiveCheckpointingMpiTest, NamedUnitWithoutASelectiveFormIsRefused) {
  Spec s;
  s.policy = ActivationCheckpointingConfig::NAMED;
  s.named = {"h.1", "head"};
  s.selective = true;
  absl::StatusOr<std::unique_ptr<Engine>> engine = MakeEngine(s);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.status().message(),
            "engine.activation_checkpointing.units: 'head' has no selective form (selective: true)");
}

}  // namespace
}  // namespace zeroshard
