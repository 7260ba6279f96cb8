#include "models/classifier/classifier_data.h"

#include <cmath>
#include <utility>

#include "core/hash.h"
#include "models/classifier/classifier_model.h"

namespace zeroshard {
namespace {

// A counter generator: value i of stream (seed, stream) is SplitMix64 of both
// and i, so it needs no state beyond the counter.
class Stream {
 public:
  Stream(uint64_t seed, uint64_t stream) : key_(SplitMix64(SplitMix64(seed) ^ SplitMix64(stream + 1))) {}
  uint64_t Next() { return SplitMix64(key_ ^ SplitMix64(counter_++)); }
  // Uniform in [0, 1), 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Box-Muller, one value per call (the pair's cosine half).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

constexpr uint64_t kCentres = 0, kTrain = 1, kHeldOut = 2;

}  // namespace

LabeledExamples GenerateBlobs(const BlobOptions& o, BlobSplit split) {
  const int d = o.input_dim;
  std::vector<double> centres(static_cast<size_t>(o.num_classes) * d);
  Stream centre_stream(o.seed, kCentres);
  for (double& c : centres) c = centre_stream.Normal();
  Stream s(o.seed, split == BlobSplit::kTrain ? kTrain : kHeldOut);
  LabeledExamples out;
  out.input_dim = d;
  out.features.resize(static_cast<size_t>(o.examples) * d);
  out.labels.resize(o.examples);
  for (int64_t i = 0; i < o.examples; ++i) {
    const int32_t label = static_cast<int32_t>(s.Next() % static_cast<uint64_t>(o.num_classes));
    for (int k = 0; k < d; ++k) {
      out.features[i * d + k] = static_cast<float>(centres[label * d + k] + o.noise * s.Normal());
    }
    const bool unlabeled = s.Uniform() < o.unlabeled_fraction;
    out.labels[i] = unlabeled ? -1 : label;
  }
  return out;
}

ExampleBatch::ExampleBatch(int64_t rows, int input_dim)
    : input_dim_(input_dim), features_(rows * input_dim), labels_(rows, -1) {
  TensorView f;
  f.data = features_.data();
  f.dtype = DType::kF32;
  f.shape = {rows, input_dim};
  TensorView l;
  l.data = labels_.data();
  l.dtype = DType::kI32;
  l.shape = {rows};
  batch_.Add(kFeatures, f);
  batch_.Add(kLabels, l);
}

void ExampleBatch::SetRow(int64_t row, const LabeledExamples& examples, int64_t index) {
  float* f = features_.data() + row * input_dim_;
  if (index < 0) {
    for (int k = 0; k < input_dim_; ++k) f[k] = 0.0f;
    labels_[row] = -1;
    return;
  }
  const float* src = examples.features.data() + index * input_dim_;
  for (int k = 0; k < input_dim_; ++k) f[k] = src[k];
  labels_[row] = examples.labels[index];
}

int64_t ExampleOfStep(const BatchPlan& plan, int64_t num_examples, int64_t step, int64_t j) {
  return (step * plan.batch_size + j) % num_examples;
}

RankBatches::RankBatches(const BatchPlan& plan, int input_dim, int dp_rank) : plan_(plan), dp_rank_(dp_rank) {
  for (int64_t m = 0; m < plan.accumulation_steps; ++m) {
    micro_.push_back(std::make_unique<ExampleBatch>(plan.micro_batch_size(), input_dim));
    views_.push_back(micro_.back()->batch());
  }
}

void RankBatches::Fill(const LabeledExamples& examples, int64_t step) {
  for (int64_t m = 0; m < plan_.accumulation_steps; ++m) {
    for (int64_t b = 0; b < plan_.micro_batch_size(); ++b) {
      const int64_t j = SequenceOfSlot(plan_, m, dp_rank_, b);
      micro_[m]->SetRow(b, examples, ExampleOfStep(plan_, examples.size(), step, j));
    }
  }
}

std::unique_ptr<ExampleBatch> EvalShard(const LabeledExamples& examples, int dp, int dp_rank) {
  const int64_t rows = (examples.size() + dp - 1) / dp;
  auto batch = std::make_unique<ExampleBatch>(rows, examples.input_dim);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = dp_rank * rows + r;
    batch->SetRow(r, examples, i < examples.size() ? i : -1);
  }
  return batch;
}

}  // namespace zeroshard
