// Cutting one global batch of token sequences into each rank's
// micro-batches, by data/batch_plan.h's rule: sequence j of the step goes to
// micro-batch m = j / (dp·B), rank r = (j / B) % dp, row b = j % B, with
// B = global_batch / (dp·k). Tests and benchmarks feed the engine with it.
#ifndef ZEROSHARD_ENGINE_TESTING_GLOBAL_BATCH_H_
#define ZEROSHARD_ENGINE_TESTING_GLOBAL_BATCH_H_

#include <cstdint>
#include <random>
#include <vector>

#include "nn/batch.h"

namespace zeroshard {

// Owns one micro-batch's tokens; `view` points into them (do not copy a
// HostBatch after taking the view: move the vector that holds it instead).
struct HostBatch {
  std::vector<int32_t> inputs, targets;
  Batch view;  // "inputs" and "targets", i32 (B, T)
};

// `tokens` holds global_batch sequences of seq_len + 1 tokens. Precondition:
// dp·k divides global_batch.
std::vector<HostBatch> MicroBatchesForRank(const std::vector<int32_t>& tokens, int global_batch, int seq_len, int dp,
                                           int k, int rank);

// Views of every micro-batch, in order.
std::vector<Batch> Views(const std::vector<HostBatch>& batches);

// global_batch * (seq_len + 1) uniform tokens in [0, vocab) from `seed`.
std::vector<int32_t> RandomTokens(uint32_t seed, int global_batch, int seq_len, int vocab);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_TESTING_GLOBAL_BATCH_H_
