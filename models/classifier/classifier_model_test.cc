// The classifier's units on one rank (nn/ResidentModel): gradients against
// finite differences, the frozen layer, unlabeled rows, errors; and the
// generated data and its split over ranks.
#include "models/classifier/classifier_model.h"

#include <cmath>
#include <set>

#include "core/testing/test_seed.h"
#include "models/classifier/classifier_config.h"
#include "models/classifier/classifier_data.h"
#include "gtest/gtest.h"
#include "kernels/context.h"
#include "nn/resident_model.h"

namespace zeroshard {
namespace {

ClassifierModelConfig SmallModel(bool frozen, ClassifierModelConfig::Activation act) {
  ClassifierModelConfig m;
  m.set_input_dim(5);
  m.set_projection_dim(7);
  m.add_hidden(6);
  m.add_hidden(4);
  m.set_num_classes(3);
  m.set_freeze_input_layer(frozen);
  m.set_activation(act);
  return m;
}

LabeledExamples Blobs(int64_t n, double unlabeled, uint64_t seed, BlobSplit split = BlobSplit::kTrain) {
  BlobOptions o;
  o.seed = seed;
  o.examples = n;
  o.input_dim = 5;
  o.num_classes = 3;
  o.unlabeled_fraction = unlabeled;
  return GenerateBlobs(o, split);
}

std::unique_ptr<ExampleBatch> Whole(const LabeledExamples& e) {
  auto b = std::make_unique<ExampleBatch>(e.size(), e.input_dim);
  for (int64_t i = 0; i < e.size(); ++i) b->SetRow(i, e, i);
  return b;
}

ComputeContext Cpu() {
  ComputeContext ctx;
  ctx.kernels = kernels::KernelContext::Cpu(1);
  return ctx;
}

TEST(ClassifierModelTest, GradientsMatchFiniteDifferences) {
  const uint64_t seed = TestSeed();
  for (auto act : {ClassifierModelConfig::TANH, ClassifierModelConfig::RELU}) {
    SCOPED_TRACE(ClassifierModelConfig::Activation_Name(act));
    auto model = BuildClassifier(SmallModel(/*frozen=*/false, act));
    ASSERT_TRUE(model.ok()) << model.status();
    auto rm = ResidentModel::Create(model->get(), Cpu());
    ASSERT_TRUE(rm.ok()) << rm.status();
    ASSERT_TRUE(rm->InitParams(seed).ok());
    const LabeledExamples data = Blobs(9, 0.3, seed);
    const std::unique_ptr<ExampleBatch> batch = Whole(data);
    absl::StatusOr<LossTerms> terms = rm->Forward(batch->batch());
    ASSERT_TRUE(terms.ok()) << terms.status();
    ASSERT_GT(terms->loss.weight, 0);
    const float dsum = static_cast<float>(1.0 / terms->loss.weight);  // the gradient of the mean
    ASSERT_TRUE(rm->ZeroGrads().ok());
    ASSERT_TRUE(rm->ForwardBackward(batch->batch(), dsum).ok());
    for (const auto& unit : (*model)->units) {
      for (const ParamSpec& spec : unit->params()) {
        const ParamLocation loc = *(*model)->FindParam(spec.name);
        float* p = rm->param(loc).as<float>();
        const float* g = rm->grad(loc).as<float>();
        for (int64_t i = 0; i < spec.numel(); i += 3) {
          const float keep = p[i];
          const float h = 1e-2f;
          const double centre = rm->Forward(batch->batch())->loss.sum;
          p[i] = keep + h;
          const double up = rm->Forward(batch->batch())->loss.sum;
          p[i] = keep - h;
          const double down = rm->Forward(batch->batch())->loss.sum;
          p[i] = keep;
          const double numeric = (up - down) / (2 * h) * dsum;
          // A ReLU kink within h of some row makes the two one-sided slopes differ: no derivative to compare.
          const double bend = std::fabs((up - centre) - (centre - down)) / h * dsum;
          if (act == ClassifierModelConfig::RELU && bend > 1e-3) continue;
          EXPECT_NEAR(g[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << spec.name << "[" << i << "]";
        }
      }
    }
  }
}

TEST(ClassifierModelTest, TheFrozenProjectionGetsNoGradient) {
  auto model = BuildClassifier(SmallModel(/*frozen=*/true, ClassifierModelConfig::TANH));
  ASSERT_TRUE(model.ok());
  EXPECT_FALSE((*model)->units[0]->params()[0].trainable);
  for (size_t u = 1; u < (*model)->units.size(); ++u) EXPECT_TRUE((*model)->units[u]->params()[0].trainable);
  auto rm = ResidentModel::Create(model->get(), Cpu());
  ASSERT_TRUE(rm.ok());
  ASSERT_TRUE(rm->InitParams(3).ok());
  const std::unique_ptr<ExampleBatch> batch = Whole(Blobs(8, 0, 3));
  ASSERT_TRUE(rm->ForwardBackward(batch->batch(), 0.125f).ok());
  const ParamLocation w = *(*model)->FindParam("input.weight");
  const TensorView g = rm->grad(w);
  for (int64_t i = 0; i < g.numel(); ++i) ASSERT_EQ(g.as<float>()[i], 0.0f) << i;
  const TensorView dh = rm->grad(*(*model)->FindParam("hidden.0.weight"));
  double norm = 0;
  for (int64_t i = 0; i < dh.numel(); ++i) norm += std::fabs(dh.as<float>()[i]);
  EXPECT_GT(norm, 0);
}

TEST(ClassifierModelTest, UnlabeledRowsWeighNothing) {
  auto model = BuildClassifier(SmallModel(true, ClassifierModelConfig::TANH));
  auto rm = ResidentModel::Create(model->get(), Cpu());
  ASSERT_TRUE(rm->InitParams(11).ok());
  LabeledExamples data = Blobs(10, 0, 11);
  LabeledExamples first = data;  // rows 0..5 only
  first.features.resize(6 * 5);
  first.labels.resize(6);
  for (int i = 6; i < 10; ++i) data.labels[i] = -1;
  const std::unique_ptr<ExampleBatch> masked = Whole(data), kept = Whole(first);
  absl::StatusOr<LossTerms> a = rm->Forward(masked->batch()), b = rm->Forward(kept->batch());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->loss.weight, 6);
  EXPECT_EQ(a->loss.sum, b->loss.sum);
  ASSERT_EQ(a->metrics.size(), 1u);
  EXPECT_EQ(a->metrics[0].weight, 6);
  EXPECT_EQ(a->metrics[0].sum, b->metrics[0].sum);
  EXPECT_EQ((*model)->units.back()->metric_names(), std::vector<std::string>{"accuracy"});
  // A row's gradient is zero when it is unlabeled.
  for (int i = 0; i < 10; ++i) data.labels[i] = -1;
  const std::unique_ptr<ExampleBatch> none = Whole(data);
  ASSERT_TRUE(rm->ZeroGrads().ok());
  ASSERT_TRUE(rm->ForwardBackward(none->batch(), 1.0f).ok());
  const std::vector<float> grads = *rm->CopyGradsToHost();
  for (float g : grads) ASSERT_EQ(g, 0.0f);
}

TEST(ClassifierModelTest, BadBatchesAreNamed) {
  auto model = BuildClassifier(SmallModel(true, ClassifierModelConfig::TANH));
  auto rm = ResidentModel::Create(model->get(), Cpu());
  ASSERT_TRUE(rm->InitParams(1).ok());
  LabeledExamples data = Blobs(4, 0, 1);
  data.labels[2] = 3;
  absl::StatusOr<LossTerms> r = rm->Forward(Whole(data)->batch());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "batch tensor 'labels' row 2 is 3; expected -1 (unlabeled) or a class in [0, 3)");
  ExampleBatch narrow(4, 6);
  r = rm->Forward(narrow.batch());
  EXPECT_EQ(r.status().message(), "batch tensor 'features' is f32[4, 6] on cpu; expected f32[rows, 5] on the cpu");
  ClassifierModelConfig bad = SmallModel(true, ClassifierModelConfig::TANH);
  bad.set_hidden(1, 0);
  EXPECT_EQ(BuildClassifier(bad).status().message(), "model.hidden[1]: 0 is out of range; expected >= 1");
}

TEST(ClassifierDataTest, BlobsArePureFunctionsOfTheirOptions) {
  const LabeledExamples a = Blobs(500, 0.2, 42), b = Blobs(500, 0.2, 42);
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.labels, b.labels);
  const LabeledExamples held = Blobs(500, 0.2, 42, BlobSplit::kHeldOut);
  EXPECT_NE(a.features, held.features);
  int unlabeled = 0;
  std::set<int32_t> classes;
  for (int32_t l : a.labels) {
    unlabeled += l < 0;
    if (l >= 0) classes.insert(l);
  }
  EXPECT_EQ(classes, (std::set<int32_t>{0, 1, 2}));
  EXPECT_GT(unlabeled, 60);  // 100 expected
  EXPECT_LT(unlabeled, 140);
}

TEST(ClassifierDataTest, RanksAndMicroBatchesSplitTheStepAsBatchPlanSays) {
  const LabeledExamples data = Blobs(50, 0, 5);
  BatchPlan plan;
  plan.batch_size = 12;
  plan.dp = 3;
  plan.accumulation_steps = 2;
  // Step 3 covers examples 36..47; rank 1's micro-batch 1, row 0 is j = 1*3*2 + 1*2 + 0 = 8.
  RankBatches rank1(plan, 5, 1);
  rank1.Fill(data, 3);
  ASSERT_EQ(rank1.batches().size(), 2u);
  const TensorView f = rank1.batches()[1].tensors()[0].view;
  ASSERT_EQ(f.shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(f.as<float>()[0], data.features[(36 + 8) * 5]);
  EXPECT_EQ(rank1.batches()[1].tensors()[1].view.as<int32_t>()[1], data.labels[36 + 9]);
  // Past the end the examples wrap around: step 4 starts at 48, its j = 2 is example 0.
  EXPECT_EQ(ExampleOfStep(plan, 50, 4, 2), 0);
  // Every example of a step lands in exactly one slot.
  std::multiset<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    for (int64_t m = 0; m < 2; ++m) {
      for (int64_t b = 0; b < 2; ++b) seen.insert(ExampleOfStep(plan, 50, 3, SequenceOfSlot(plan, m, r, b)));
    }
  }
  std::multiset<int64_t> want;
  for (int64_t i = 36; i < 48; ++i) want.insert(i);
  EXPECT_EQ(seen, want);
}

TEST(ClassifierDataTest, EvalShardsCoverTheSplitOncePaddedUnlabeled) {
  const LabeledExamples data = Blobs(10, 0, 9);
  int64_t labeled = 0;
  for (int r = 0; r < 3; ++r) {
    const std::unique_ptr<ExampleBatch> shard = EvalShard(data, 3, r);
    ASSERT_EQ(shard->rows(), 4);
    const int32_t* labels = shard->batch().tensors()[1].view.as<int32_t>();
    for (int64_t i = 0; i < 4; ++i) {
      const int64_t example = r * 4 + i;
      EXPECT_EQ(labels[i], example < 10 ? data.labels[example] : -1);
      labeled += labels[i] >= 0;
    }
  }
  EXPECT_EQ(labeled, 10);
}

}  // namespace
}  // namespace zeroshard
