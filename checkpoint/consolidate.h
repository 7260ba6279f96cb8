// `zeroshard ckpt consolidate`: a sharded checkpoint to one full-model
// safetensors file with the parameter names and shapes the model declares.
#ifndef ZEROSHARD_CHECKPOINT_CONSOLIDATE_H_
#define ZEROSHARD_CHECKPOINT_CONSOLIDATE_H_

#include <string>

#include "absl/status/status.h"
#include "checkpoint/checkpoint_reader.h"
#include "core/dtype.h"

namespace zeroshard {

struct ConsolidateOptions {
  DType dtype = DType::kF32;  // kF32, kBF16 or kF16 (round to nearest even)
  // Also write the optimizer state, F32, as "optimizer.<kind>.<name>".
  bool optimizer = false;
};

// Every owned parameter, in unit and declaration order, under its own name
// and shape (a borrowed parameter such as the tied LM head is not written
// again), from the master weights. Metadata: "format" = "pt" (what
// Hugging Face loaders expect), "zeroshard.step", "zeroshard.optimizer_steps"
// and "zeroshard.dtype". The bytes depend only on the values, never on the
// source's dp: consolidating a checkpoint and its reshard gives equal files.
absl::Status ConsolidateCheckpoint(const CheckpointReader& reader, const std::string& out_path,
                                   const ConsolidateOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_CONSOLIDATE_H_
