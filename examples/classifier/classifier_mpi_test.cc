// The classifier example trained by the engine under mpirun -np 3 (one
// process per dp rank): ZeRO-3 and the other stages against an independent
// single-rank unsharded reference (nn/ResidentModel on the whole global
// batch + the optimizer kernels), the frozen projection left bitwise
// untouched with no optimizer state, the loss falling, and Evaluate's
// accuracy on the held-out split.
//
// The model: 8 features -> frozen projection 13 -> hidden 11 -> hidden 7 ->
// 3 classes (odd sizes, so no unit divides evenly over 3 ranks); a quarter
// of the training examples unlabeled, so micro-batches weigh differently.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/process_grid.h"
#include "engine/engine.h"
#include "engine/state_view.h"
#include "engine/testing/shared_seed.h"
#include "models/classifier/classifier_data.h"
#include "models/classifier/classifier_model.h"
#include "gtest/gtest.h"
#include "kernels/optimizer.h"
#include "nn/param_init.h"
#include "nn/resident_model.h"
#include "sharding/grad_clip.h"
#include "sharding/lr_schedule.h"
#include "sharding/weight_decay_policy.h"
#include "tests/data_parallel_world.h"

namespace zeroshard {
namespace {

constexpr int kGlobalBatch = 36;
constexpr int kSteps = 10;
constexpr uint64_t kInitSeed = 5;
constexpr float kAdamEps = 1e-6f;  // as engine_mpi_test: keeps f32-noise gradients from steering AdamW

ProcessGrid& Grid() { return DataParallelWorld(); }

ClassifierModelConfig ModelConfig() {
  ClassifierModelConfig m;
  m.set_input_dim(8);
  m.set_projection_dim(13);
  m.add_hidden(11);
  m.add_hidden(7);
  m.set_num_classes(3);
  m.set_freeze_input_layer(true);
  return m;
}

BlobOptions Data(uint64_t seed, int64_t examples, double unlabeled) {
  BlobOptions o;
  o.seed = seed;
  o.examples = examples;
  o.input_dim = 8;
  o.num_classes = 3;
  o.noise = 1.0;
  o.unlabeled_fraction = unlabeled;
  return o;
}

struct Case {
  int stage;
  int accumulation;
  OptimizerConfig::Type optimizer;
};

std::string Name(const Case& c) {
  return absl::StrCat("stage ", c.stage, " accumulation ", c.accumulation, " ",
                      OptimizerConfig::Type_Name(c.optimizer));
}

EngineConfig MakeConfig(const Case& c, int steps) {
  EngineConfig e;
  e.mutable_zero()->set_stage(c.stage);
  e.mutable_zero()->set_bucket_bytes(256);  // several buckets
  e.set_gradient_accumulation_steps(c.accumulation);
  e.mutable_parallel()->set_dp(Grid().dp().size());
  OptimizerConfig* o = e.mutable_optimizer();
  o->set_type(c.optimizer);
  if (c.optimizer == OptimizerConfig::ADAMW) {
    o->set_lr(2e-2);
    o->set_eps(kAdamEps);
    o->set_weight_decay(0.1);
  } else {
    o->set_lr(0.2);
    o->set_momentum(0.9);
    o->set_weight_decay(0.01);
  }
  o->set_grad_clip(1.0);
  e.mutable_lr_schedule()->set_type(LrScheduleConfig::WARMUP_COSINE);
  e.mutable_lr_schedule()->set_warmup_steps(2);
  e.mutable_lr_schedule()->set_decay_steps(steps);
  e.mutable_lr_schedule()->set_min_lr(1e-3);
  e.mutable_device()->set_threads_per_rank(1);
  e.set_seed(kInitSeed);
  return e;
}

using Weights = std::map<std::string, std::vector<float>>;

struct EngineRun {
  Weights weights;
  std::vector<StepResult> results;
  EvalResult eval;
};

// Trains `steps` steps; checks the frozen unit's state and the optimizer
// memory along the way.
EngineRun RunEngine(const Case& c, int steps, const LabeledExamples& train, const LabeledExamples& held_out) {
  EngineRun run;
  auto model = BuildClassifier(ModelConfig());
  EXPECT_TRUE(model.ok()) << model.status();
  auto engine = Engine::Create(MakeConfig(c, steps), &Grid(), std::move(model).value());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return run;
  const Engine& trained = **engine;
  const EngineStateView& view = trained.state();
  const int first_state = EngineStateView::kFirstOptimizerKind;

  // The frozen projection has no optimizer state, and AdamW's state is
  // exactly m and v of the trainable units' shards (SGD: the momentum).
  EXPECT_FALSE(trained.trainable(0));
  EXPECT_FALSE(view.region(0, first_state).present);
  int64_t trainable_shard = 0;
  for (int u = 0; u < trained.num_units(); ++u) {
    if (u > 0) {
      EXPECT_TRUE(view.region(u, first_state).present) << u;
    }
    if (trained.trainable(u)) trainable_shard += view.region(u, EngineStateView::kMaster).length;
  }
  if (c.stage > 0) {
    int64_t layout_shards = 0;
    for (int u = 1; u < trained.num_units(); ++u) layout_shards += trained.layout(u).shard_numel();
    EXPECT_EQ(trainable_shard, layout_shards);
  }
  const int64_t bytes_per_element = c.optimizer == OptimizerConfig::ADAMW ? 8 : 4;
  EXPECT_EQ((*engine)->memory().Usage(MemoryCategory::kOptimizerState).current, bytes_per_element * trainable_shard);

  BatchPlan plan;
  plan.batch_size = kGlobalBatch;
  plan.dp = Grid().dp().size();
  plan.accumulation_steps = c.accumulation;
  RankBatches batches(plan, train.input_dim, Grid().dp_rank());
  for (int s = 0; s < steps; ++s) {
    batches.Fill(train, s);
    absl::StatusOr<StepResult> r = (*engine)->TrainStep(batches.batches());
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return run;
    run.results.push_back(*r);
  }
  EXPECT_EQ((*engine)->memory().Usage(MemoryCategory::kOptimizerState).current, bytes_per_element * trainable_shard);
  for (const std::string& name : (*engine)->ParamNames()) {
    absl::StatusOr<std::vector<float>> w = (*engine)->GatherParam(name);
    EXPECT_TRUE(w.ok()) << w.status();
    if (w.ok()) run.weights[name] = std::move(*w);
  }
  const std::unique_ptr<ExampleBatch> eval = EvalShard(held_out, Grid().dp().size(), Grid().dp_rank());
  absl::StatusOr<EvalResult> e = (*engine)->Evaluate(eval->batch());
  EXPECT_TRUE(e.ok()) << e.status();
  if (e.ok()) run.eval = *e;
  return run;
}

struct Reference {
  Weights weights;
  std::vector<double> losses;
  LossTerms eval;
};

// Every parameter resident, each step's whole global batch in one
// forward/backward with d(objective)/d(loss sum) = 1 / its labeled
// examples, PyTorch's clip_grad_norm_ and AdamW/SGD on the trainable
// parameters only.
Reference RunReference(const Case& c, const LabeledExamples& train, const LabeledExamples& held_out) {
  Reference ref;
  auto model = BuildClassifier(ModelConfig());
  EXPECT_TRUE(model.ok());
  ComputeContext ctx;
  ctx.kernels = kernels::KernelContext::Cpu(1);
  auto rm = ResidentModel::Create(model->get(), ctx);
  EXPECT_TRUE(rm.ok()) << rm.status();
  EXPECT_TRUE(rm->InitParams(kInitSeed).ok());
  const EngineConfig config = MakeConfig(c, kSteps);
  const OptimizerConfig& o = config.optimizer();
  LrScheduleOptions lr_options;
  lr_options.type = LrScheduleType::kWarmupCosine;
  lr_options.lr = o.lr();
  lr_options.min_lr = config.lr_schedule().min_lr();
  lr_options.warmup_steps = config.lr_schedule().warmup_steps();
  lr_options.decay_steps = config.lr_schedule().decay_steps();
  const LrSchedule schedule = *LrSchedule::Create(lr_options);
  const WeightDecayPolicy decay;
  struct Param {
    TensorView p, g;
    std::vector<float> m, v;
    bool decay;
  };
  std::vector<Param> params;
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& spec : unit->params()) {
      if (!spec.trainable) continue;
      ParamLocation loc = *(*model)->FindParam(spec.name);
      params.push_back({rm->param(loc), rm->grad(loc), std::vector<float>(spec.numel()),
                        std::vector<float>(spec.numel()), decay.Decays(spec.name, spec.no_weight_decay)});
    }
  }
  BatchPlan plan;
  plan.batch_size = kGlobalBatch;
  ExampleBatch whole(kGlobalBatch, train.input_dim);
  for (int step = 1; step <= kSteps; ++step) {
    int64_t labeled = 0;
    for (int64_t j = 0; j < kGlobalBatch; ++j) {
      const int64_t i = ExampleOfStep(plan, train.size(), step - 1, j);
      whole.SetRow(j, train, i);
      labeled += train.labels[i] >= 0;
    }
    EXPECT_TRUE(rm->ZeroGrads().ok());
    absl::StatusOr<LossTerms> terms = rm->ForwardBackward(whole.batch(), static_cast<float>(1.0 / labeled));
    EXPECT_TRUE(terms.ok()) << terms.status();
    if (!terms.ok()) return ref;
    EXPECT_EQ(terms->loss.weight, labeled);
    ref.losses.push_back(terms->loss.sum / terms->loss.weight);
    double sumsq = 0;
    for (Param& p : params) sumsq += SumOfSquares(p.g.as<float>(), p.g.numel());
    const float coeff = ClipCoefficient(std::sqrt(static_cast<float>(sumsq)), static_cast<float>(o.grad_clip()));
    const float lr = static_cast<float>(schedule.LearningRate(step));
    for (Param& p : params) {
      float* g = p.g.as<float>();
      if (coeff < 1.0f) {
        for (int64_t i = 0; i < p.g.numel(); ++i) g[i] *= coeff;
      }
      const float wd = p.decay ? static_cast<float>(o.weight_decay()) : 0.0f;
      if (c.optimizer == OptimizerConfig::ADAMW) {
        const kernels::AdamWHyper h{lr, static_cast<float>(o.beta1()), static_cast<float>(o.beta2()), kAdamEps, wd,
                                    step};
        EXPECT_TRUE(kernels::AdamWUpdate(ctx.kernels, p.p.as<float>(), g, p.m.data(), p.v.data(), p.p.numel(), h).ok());
      } else {
        const kernels::SgdHyper h{lr, static_cast<float>(o.momentum()), 0.0f, wd, false, step == 1};
        EXPECT_TRUE(kernels::SgdUpdate(ctx.kernels, p.p.as<float>(), g, p.m.data(), p.p.numel(), h).ok());
      }
    }
  }
  for (const auto& unit : (*model)->units) {
    for (const ParamSpec& spec : unit->params()) {
      TensorView v = rm->param(*(*model)->FindParam(spec.name));
      ref.weights[spec.name].assign(v.as<float>(), v.as<float>() + v.numel());
    }
  }
  std::unique_ptr<ExampleBatch> eval = EvalShard(held_out, 1, 0);
  absl::StatusOr<LossTerms> e = rm->Forward(eval->batch());
  EXPECT_TRUE(e.ok()) << e.status();
  if (e.ok()) ref.eval = *e;
  return ref;
}

// ||a - ref||_2 / ||ref||_2 over the trainable parameters, and the worst
// single tensor.
struct Parity {
  double whole = 0, worst_tensor = 0;
  std::string worst_name;
};
Parity Compare(const Weights& a, const Weights& ref, const Model& model) {
  Parity p;
  double diff_all = 0, norm_all = 0;
  for (const auto& unit : model.units) {
    for (const ParamSpec& spec : unit->params()) {
      if (!spec.trainable) continue;
      const std::vector<float>& r = ref.at(spec.name);
      auto it = a.find(spec.name);
      if (it == a.end() || it->second.size() != r.size()) return Parity{INFINITY, INFINITY, spec.name};
      double diff = 0, norm = 0;
      for (size_t i = 0; i < r.size(); ++i) {
        const double d = static_cast<double>(it->second[i]) - r[i];
        diff += d * d;
        norm += static_cast<double>(r[i]) * r[i];
      }
      diff_all += diff;
      norm_all += norm;
      if (std::sqrt(diff / norm) > p.worst_tensor) {
        p.worst_tensor = std::sqrt(diff / norm);
        p.worst_name = spec.name;
      }
    }
  }
  p.whole = std::sqrt(diff_all / norm_all);
  return p;
}

TEST(ClassifierMpiTest, ShardedTrainingMatchesTheUnshardedReference) {
  ASSERT_EQ(Grid().dp().size(), 3) << "run under mpirun -np 3";
  const uint64_t seed = SharedTestSeed(Grid().dp());
  const LabeledExamples train = GenerateBlobs(Data(seed, 90, 0.25), BlobSplit::kTrain);
  const LabeledExamples held_out = GenerateBlobs(Data(seed, 100, 0), BlobSplit::kHeldOut);
  const std::unique_ptr<Model> model = std::move(BuildClassifier(ModelConfig())).value();
  const ParamSpec& frozen = model->units[0]->params()[0];
  std::vector<float> initial(frozen.numel());
  InitParam(frozen, kInitSeed, initial.data());

  const Case cases[] = {
      {3, 2, OptimizerConfig::ADAMW},
      {3, 3, OptimizerConfig::SGD},
      {2, 1, OptimizerConfig::ADAMW},
      {0, 2, OptimizerConfig::ADAMW},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Name(c));
    const Reference ref = RunReference(c, train, held_out);
    const EngineRun run = RunEngine(c, kSteps, train, held_out);
    ASSERT_EQ(run.results.size(), static_cast<size_t>(kSteps));
    const Parity parity = Compare(run.weights, ref.weights, *model);
    // The reference sums the gradient in another order, and AdamW turns that
    // rounding into steps of up to lr where a gradient is near zero: over 300
    // seeds the whole model's relative L2 had median 5e-8 and reached 1.2e-5
    // (worst tensor 7.5e-5, hidden.0.bias); a mishandled shard gives > 1e-2.
    EXPECT_LE(parity.whole, 1e-4);
    EXPECT_LE(parity.worst_tensor, 1e-3) << parity.worst_name;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(run.results[s].loss, ref.losses[s], 1e-5 * ref.losses[s]) << "step " << s + 1;
      EXPECT_EQ(run.results[s].metrics.size(), 1u);
    }
    // The frozen projection: bitwise its initial values.
    const std::vector<float>& w = run.weights.at(frozen.name);
    ASSERT_EQ(w.size(), initial.size());
    EXPECT_EQ(std::memcmp(w.data(), initial.data(), w.size() * sizeof(float)), 0) << "the frozen layer moved";
    // Evaluate over every rank's shard of the held-out split = the reference on all of it.
    EXPECT_EQ(run.eval.loss_weight, held_out.size());
    EXPECT_NEAR(run.eval.loss, ref.eval.loss.sum / ref.eval.loss.weight, 1e-5);
    ASSERT_EQ(run.eval.metrics.size(), 1u);
    EXPECT_EQ(run.eval.metrics[0].name, "accuracy");
    EXPECT_NEAR(run.eval.metrics[0].value, ref.eval.metrics[0].sum / ref.eval.metrics[0].weight, 1.5 / held_out.size());
    if (Grid().dp_rank() == 0) {
      std::printf("%s: loss %.6f -> %.6f, held-out accuracy %.4f; relative L2 to the reference: %.3g (worst tensor "
                  "%.3g, %s)\n",
                  Name(c).c_str(), run.results.front().loss, run.results.back().loss, run.eval.metrics[0].value,
                  parity.whole, parity.worst_tensor, parity.worst_name.c_str());
    }
  }
}

// The blobs' overlap is random, and with it how far 60 steps can go: over
// 25 seeds the last five steps' loss was 0.05 to 0.54 of the first step's
// (accuracy 0.74 to 1.0), hence the bounds 0.65 and 0.6 (chance: 1/3).
TEST(ClassifierMpiTest, Zero3TrainingCutsTheLoss) {
  const uint64_t seed = SharedTestSeed(Grid().dp());
  const LabeledExamples train = GenerateBlobs(Data(seed, 720, 0.1), BlobSplit::kTrain);
  const LabeledExamples held_out = GenerateBlobs(Data(seed, 300, 0), BlobSplit::kHeldOut);
  const int steps = 60;
  const EngineRun run = RunEngine({3, 2, OptimizerConfig::ADAMW}, steps, train, held_out);
  ASSERT_EQ(run.results.size(), static_cast<size_t>(steps));
  // The last five steps' mean: one batch of 36 examples is noisy.
  double last = 0;
  for (int s = steps - 5; s < steps; ++s) last += run.results[s].loss / 5;
  EXPECT_LT(last, 0.65 * run.results.front().loss);
  ASSERT_EQ(run.eval.metrics.size(), 1u);
  EXPECT_GT(run.eval.metrics[0].value, 0.6);
  if (Grid().dp_rank() == 0) {
    std::printf("ZeRO-3, %d steps: loss %.4f -> %.4f (last five), held-out loss %.4f accuracy %.4f\n", steps,
                run.results.front().loss, last, run.eval.loss, run.eval.metrics[0].value);
  }
}

}  // namespace
}  // namespace zeroshard
