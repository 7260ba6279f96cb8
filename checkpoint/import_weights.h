// `zeroshard ckpt import`: full model weights in safetensors layout (e.g. a
// `consolidate` output) to a step-0 checkpoint that a training job loads to
// start from them: master weights from the file, optimizer state zero,
// topology from the run's engine section.
#ifndef ZEROSHARD_CHECKPOINT_IMPORT_WEIGHTS_H_
#define ZEROSHARD_CHECKPOINT_IMPORT_WEIGHTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "comm/process_grid.h"
#include "nn/model.h"
#include "proto/checkpoint.pb.h"

namespace zeroshard {

// `model` is the run's model (built from the config by its caller, e.g.
// through the model registry), laid out for run.engine()'s (dp, tp, pp)
// layout (checkpoint/checkpoint_layout.h) at its ZeRO stage; `run` is
// recorded in the manifest. Every model parameter must be in the file with the shape users
// see (unpadded; F32, BF16 or F16); other tensors are ignored as
// ImportSafetensors ignores them
// (engine_checkpoint.h) and any other extra tensor is kInvalidArgument.
// Writes <out_root>/step_0 and `latest`; returns the step directory.
absl::StatusOr<std::string> ImportCheckpoint(const std::string& safetensors_path, const Model& model,
                                             const CheckpointRunConfig& run, const std::string& out_root);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_IMPORT_WEIGHTS_H_
