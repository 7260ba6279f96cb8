// The classifier example's data: Gaussian blobs generated from a seed (no
// download), and the batches each rank feeds the engine.
//
// Class c's centre has N(0, 1) coordinates; an example of class c is its
// centre plus N(0, noise^2) per feature, c uniform. The centres come from
// `seed`, the training and held-out examples from two further streams of
// it, so both splits share the classes but no example. Every value is a
// pure function of the options (a splitmix64 counter generator feeding
// Box-Muller), the same on every rank and platform.
#ifndef ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_DATA_H_
#define ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "data/batch_plan.h"
#include "nn/batch.h"

namespace zeroshard {

struct BlobOptions {
  uint64_t seed = 1;
  int64_t examples = 0;
  int input_dim = 16;
  int num_classes = 4;
  double noise = 1.0;
  // Each example is left unlabeled (label -1) with this probability.
  double unlabeled_fraction = 0;
};

enum class BlobSplit { kTrain, kHeldOut };

// Row-major features [size, input_dim] and labels [size] (-1: unlabeled).
struct LabeledExamples {
  int input_dim = 0;
  std::vector<float> features;
  std::vector<int32_t> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

LabeledExamples GenerateBlobs(const BlobOptions& options, BlobSplit split);

// Host tensors of `rows` examples and their Batch ("features", "labels").
// Not copyable: the batch views its own vectors.
class ExampleBatch {
 public:
  ExampleBatch(int64_t rows, int input_dim);
  ExampleBatch(const ExampleBatch&) = delete;
  ExampleBatch& operator=(const ExampleBatch&) = delete;

  // Row `row` = example `index` of `examples`; index -1 gives a padding row
  // (zero features, unlabeled).
  void SetRow(int64_t row, const LabeledExamples& examples, int64_t index);
  const Batch& batch() const { return batch_; }
  int64_t rows() const { return static_cast<int64_t>(labels_.size()); }

 private:
  int input_dim_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  Batch batch_;
};

// A global batch of examples is cut the way data/batch_plan.h cuts
// sequences (its seq_len is unused here): example j of a step goes to
// micro-batch j / (dp*B), rank (j / B) % dp, row j % B, with B =
// batch_size / (dp * accumulation_steps). Step s's example j is example
// (s*batch_size + j) mod num_examples.
int64_t ExampleOfStep(const BatchPlan& plan, int64_t num_examples, int64_t step, int64_t j);

// One rank's micro-batches of every step.
class RankBatches {
 public:
  // Precondition: plan.Validate() would pass but for seq_len.
  RankBatches(const BatchPlan& plan, int input_dim, int dp_rank);
  // Fills every micro-batch with step `step`'s examples for this rank.
  void Fill(const LabeledExamples& examples, int64_t step);
  // gradient_accumulation_steps batches, for Engine::TrainStep.
  const std::vector<Batch>& batches() const { return views_; }

 private:
  BatchPlan plan_;
  int dp_rank_;
  std::vector<std::unique_ptr<ExampleBatch>> micro_;
  std::vector<Batch> views_;
};

// The whole of `examples` spread over dp ranks for one Engine::Evaluate
// call: rank r gets rows [r*R, (r+1)*R), R = ceil(size / dp), the last rows
// padded (unlabeled) so every rank's batch has the same shape.
std::unique_ptr<ExampleBatch> EvalShard(const LabeledExamples& examples, int dp, int dp_rank);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_DATA_H_
