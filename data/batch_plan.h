// The deterministic order in which sequences reach ranks and micro-batches.
//
// Sequences are windows of seq_len + 1 tokens; window w starts at token
// w * seq_len (consecutive windows share one token, as in llm.c), and there are
// W = (num_tokens - 1) / seq_len of them. Global sequence g (counted over the
// whole run) is window order_e[g mod W] with epoch e = g / W, where order_e is
// the identity when shuffle_seed == 0 and otherwise a Fisher-Yates permutation
// driven by splitmix64(shuffle_seed, e).
//
// Optimizer step s consumes global sequences s*batch_size .. s*batch_size +
// batch_size - 1. With B = batch_size / (dp * accumulation_steps), sequence j
// of the step (0 <= j < batch_size) goes to
//   micro-batch m = j / (dp * B), rank r = (j / B) % dp, row b = j % B,
// i.e. j = m*dp*B + r*B + b. Every (dp, accumulation_steps) split of the same
// batch_size therefore sees the same sequences in each step, so the mean loss
// and its gradient are the same up to f32 summation order. docs/data.md.
#ifndef ZEROSHARD_DATA_BATCH_PLAN_H_
#define ZEROSHARD_DATA_BATCH_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_file.h"

namespace zeroshard {

struct BatchPlan {
  int64_t batch_size = 0;           // global sequences per optimizer step
  int64_t dp = 1;                   // data-parallel ranks
  int64_t accumulation_steps = 1;   // micro-batches per step and rank
  int64_t seq_len = 0;              // T; each sequence holds T + 1 tokens
  uint64_t shuffle_seed = 0;        // 0: windows in file order

  // Sequences per rank and micro-batch: batch_size / (dp * accumulation_steps).
  int64_t micro_batch_size() const { return batch_size / (dp * accumulation_steps); }
  // kInvalidArgument naming the values when a field is non-positive or
  // batch_size is not a multiple of dp * accumulation_steps.
  absl::Status Validate() const;
};

// Position of sequence j of a step (0 <= j < batch_size) under `plan`.
struct MicroBatchSlot {
  int64_t micro_index;
  int64_t dp_rank;
  int64_t row;
};
MicroBatchSlot SlotOfSequence(const BatchPlan& plan, int64_t j);
// Inverse: sequence of the step held in (micro_index, dp_rank, row).
int64_t SequenceOfSlot(const BatchPlan& plan, int64_t micro_index, int64_t dp_rank, int64_t row);

// Cuts a TokenDataset into micro-batches by a BatchPlan. Not thread-safe
// (caches the current epoch's permutation); the dataset must outlive it.
class BatchSource {
 public:
  // kInvalidArgument from plan.Validate(), or when the dataset holds fewer
  // than seq_len + 1 tokens (no full window).
  static absl::StatusOr<BatchSource> Create(const TokenDataset* dataset, const BatchPlan& plan);

  const BatchPlan& plan() const { return plan_; }
  int64_t num_windows() const { return num_windows_; }
  // First token of global sequence g.
  int64_t WindowStart(int64_t g);

  // Writes rank `dp_rank`'s micro-batch `micro_index` of optimizer step `step`
  // into `tokens`, (B, T+1) row-major, B = plan.micro_batch_size().
  // kInvalidArgument when an index is out of range or tokens has the wrong size.
  absl::Status GetMicroBatch(int64_t step, int64_t micro_index, int64_t dp_rank, absl::Span<int32_t> tokens);
  // The same micro-batch split into inputs (B,T) = tokens[:, :T] and
  // targets (B,T) = tokens[:, 1:].
  absl::Status GetInputsTargets(int64_t step, int64_t micro_index, int64_t dp_rank, absl::Span<int32_t> inputs,
                                absl::Span<int32_t> targets);

 private:
  const TokenDataset* dataset_ = nullptr;
  BatchPlan plan_;
  int64_t num_windows_ = 0;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;  // window order of cached_epoch_ (empty: identity)
};

}  // namespace zeroshard

#endif  // ZEROSHARD_DATA_BATCH_PLAN_H_
