// The classifier example's model (docs/guide.md): an MLP over feature
// vectors, written as units the Engine shards, gathers and trains.
//
// The batch: "features" f32 [N, input_dim] and "labels" i32 [N]; a label
// of -1 marks an unlabeled row, which no loss or metric counts.
//   "input"     input.weight [D, P]                  x = f·W        (frozen by default)
//   "hidden.i"  hidden.i.weight [in, H_i], .bias     x = act(x·W + b)
//   "head"      head.weight [in, C], head.bias       loss = cross-entropy(x·W + b, label)
// The head returns the loss as (Σ over labeled rows, their count) and one
// metric, "accuracy" = (rows whose arg-max logit is their label, the
// labeled rows). The units compute in f32 on the CPU with plain loops.
#ifndef ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_MODEL_H_
#define ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "models/classifier/classifier_config.pb.h"
#include "nn/model.h"

namespace zeroshard {

// The batch tensors' names.
inline constexpr char kFeatures[] = "features";
inline constexpr char kLabels[] = "labels";

// kInvalidArgument naming the field when a dimension is below 1 (classes
// below 2). No parameter memory is allocated.
absl::StatusOr<std::unique_ptr<Model>> BuildClassifier(const ClassifierModelConfig& config);

}  // namespace zeroshard

#endif  // ZEROSHARD_MODELS_CLASSIFIER_CLASSIFIER_MODEL_H_
