// The weighted loss under mpirun: micro-batches with different numbers of
// valid targets (a negative target is padding) train on exactly the
// gradient of the global mean Σ loss / Σ valid targets — the same as one big
// batch on one rank — at every dp, accumulation and stage. The reference is
// the unsharded ResidentModel with the whole batch in one forward/backward
// and d(objective)/d(loss sum) = 1 / (valid targets).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/testing/function_observer.h"
#include "engine/testing/global_batch.h"
#include "engine/testing/tiny_gpt2.h"
#include "engine/testing/shared_seed.h"
#include "gtest/gtest.h"
#include "models/gpt2/gpt2.h"
#include "nn/resident_model.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 36;
constexpr uint64_t kSeed = 11;

ProcessGrid& Grid() { return DataParallelWorld(); }

// Random tokens every rank agrees on: rank 0's seed is broadcast (and
// printed on failure).
std::vector<int32_t> SharedTokens(std::vector<int>* mask_seed_out) {
  const int32_t seed = SharedTestSeed(Grid().dp());
  mask_seed_out->push_back(seed);
  return RandomTokens(static_cast<uint32_t>(seed), kGlobalBatch, TinyGpt2().seq_len, TinyGpt2().vocab_size);
}

// Masks the targets of each sequence past its first (first input token
// mod (T + 1)): 0 to T valid targets per sequence, a function of the data
// alone, so a sequence is masked alike wherever it lands.
void MaskTargets(std::vector<HostBatch>* batches) {
  const int T = TinyGpt2().seq_len;
  for (HostBatch& hb : *batches) {
    const int rows = static_cast<int>(hb.targets.size()) / T;
    for (int b = 0; b < rows; ++b) {
      const int valid = hb.inputs[static_cast<size_t>(b) * T] % (T + 1);
      for (int t = valid; t < T; ++t) hb.targets[static_cast<size_t>(b) * T + t] = -1;
    }
  }
}

EngineConfig Config(int stage, int dp, int k) {
  EngineConfig c;
  c.mutable_zero()->set_stage(stage);
  c.mutable_zero()->set_bucket_bytes(4096);
  c.set_gradient_accumulation_steps(k);
  c.mutable_parallel()->set_dp(dp);
  c.mutable_optimizer()->set_grad_clip(0);  // the raw gradient of the mean
  c.mutable_device()->set_threads_per_rank(1);
  c.set_seed(kSeed);
  return c;
}

// The reference gradient of every parameter, by name.
struct Reference {
  std::map<std::string, std::vector<float>> grads;
  double loss = 0;
  double weight = 0;
};

Reference RunReference(const std::vector<int32_t>& tokens) {
  Reference ref;
  auto model = BuildGpt2(TinyGpt2());
  EXPECT_TRUE(model.ok());
  ComputeContext ctx;
  ctx.kernels = kernels::KernelContext::Cpu(1);
  auto rm = ResidentModel::Create(model->get(), ctx);
  EXPECT_TRUE(rm.ok()) << rm.status();
  EXPECT_TRUE(rm->InitParams(kSeed).ok());
  std::vector<HostBatch> whole = MicroBatchesForRank(tokens, kGlobalBatch, TinyGpt2().seq_len, 1, 1, 0);
  MaskTargets(&whole);
  int64_t valid = 0;
  for (int32_t t : whole[0].targets) valid += t >= 0 ? 1 : 0;
  absl::StatusOr<LossTerms> terms = rm->ForwardBackward(whole[0].view, 1.0f / static_cast<float>(valid));
  EXPECT_TRUE(terms.ok()) << terms.status();
  ref.loss = terms->loss.sum / terms->loss.weight;
  ref.weight = terms->loss.weight;
  EXPECT_EQ(terms->loss.weight, valid);
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& spec : unit->params()) {
      TensorView g = rm->grad(*(*model)->FindParam(spec.name));
      ref.grads[spec.name].assign(g.as<float>(), g.as<float>() + g.numel());
    }
  }
  return ref;
}

TEST(WeightedLossMpiTest, MicroBatchesOfDifferentWeightsGiveTheGradientOfTheGlobalMean) {
  std::vector<int> seeds;
  const std::vector<int32_t> tokens = SharedTokens(&seeds);
  SCOPED_TRACE(absl::StrCat("token seed ", seeds[0]));
  const Reference ref = RunReference(tokens);
  const int dp = Grid().dp().size();
  const int rank = Grid().dp_rank();
  for (int k : {1, 3}) {
    for (int stage : {0, 1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat("dp ", dp, " k ", k, " stage ", stage));
      FunctionObserver compare;  // before the engine: it outlives it
      auto engine = Engine::Create(Config(stage, dp, k), &Grid(), std::move(BuildGpt2(TinyGpt2())).value());
      ASSERT_TRUE(engine.ok()) << engine.status();
      const Engine& trained = **engine;
      std::vector<HostBatch> batches = MicroBatchesForRank(tokens, kGlobalBatch, TinyGpt2().seq_len, dp, k, rank);
      MaskTargets(&batches);
      // Compare this rank's shard of the applied gradient with the same
      // elements of the reference, summing squares over every parameter.
      double diff2 = 0, norm2 = 0;
      int hooked = 0;
      compare.final_gradient = [&](const GradientEvent& grad) {
        ++hooked;
        const float* g = grad.shard;
        const FlatParamLayout& layout = trained.layout(grad.unit);
        for (const ShardSegment& seg : layout.SegmentsForRank(rank)) {
          const std::vector<float>& r = ref.grads.at(layout.params()[seg.param_index].name);
          for (int64_t i = 0; i < seg.length; ++i) {
            const double d = static_cast<double>(g[seg.offset_in_shard + i]) - r[seg.offset_in_param + i];
            diff2 += d * d;
            norm2 += static_cast<double>(r[seg.offset_in_param + i]) * r[seg.offset_in_param + i];
          }
        }
      };
      (*engine)->AddObserver(&compare);
      absl::StatusOr<StepResult> step = (*engine)->TrainStep(Views(batches));
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_EQ(hooked, trained.num_units());
      // An f32 sum of the ranks' partial sums is exact enough for a ratio.
      float fsums[2] = {static_cast<float>(diff2), static_cast<float>(norm2)};
      ASSERT_TRUE(Grid().dp().AllReduce(fsums, 2, DType::kF32, ReduceOp::kSum)->Wait().ok());
      const double relative = std::sqrt(fsums[0] / fsums[1]);
      EXPECT_LE(relative, 1e-6);
      EXPECT_EQ(step->loss_weight, ref.weight);
      EXPECT_NEAR(step->loss, ref.loss, 1e-6 * ref.loss);
      if (rank == 0) {
        std::printf("dp %d k %d stage %d: %g valid targets of %d, loss %.6f (reference %.6f), gradient relative L2 "
                    "%.3g\n",
                    dp, k, stage, ref.weight, kGlobalBatch * TinyGpt2().seq_len, step->loss, ref.loss, relative);
      }
    }
  }
}

}  // namespace
}  // namespace zeroshard
