// A plain single-rank GPT-2 training loop: the reference the sharding engine
// must reproduce at dp = 1, and the example of driving Units by hand.
//
// Each step: zero gradients; for each of `accumulation_steps` micro-batches
// (data/batch_plan.h with dp = 1) run forward and backward with
// d(objective)/d(mean loss) = 1 / accumulation_steps; then AdamW
// (kernels::AdamWUpdate, PyTorch semantics) on every parameter tensor, with
// weight decay on tensors of rank >= 2 only (matrices and embeddings; not
// biases or LayerNorm), as nanoGPT/llm.c do. Learning rate: linear warmup
// over `warmup_steps` to `lr`, then cosine decay to `lr * final_lr_fraction`
// at the last step (nanoGPT's schedule). Warmup matters at GPT-2's init: the
// residual stream starts with std ~0.02, so LayerNorm amplifies the first
// updates ~50x, and lr 3e-3 without warmup spikes the loss.
#ifndef ZEROSHARD_EXAMPLES_TRAIN_SINGLE_RANK_LOOP_H_
#define ZEROSHARD_EXAMPLES_TRAIN_SINGLE_RANK_LOOP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "data/token_file.h"
#include "models/gpt2/gpt2.h"

namespace zeroshard {

struct SingleRankTrainOptions {
  Gpt2Config model;
  int64_t batch_size = 8;  // sequences per optimizer step
  int64_t accumulation_steps = 1;
  int64_t seq_len = 64;    // T of the batches (<= model.seq_len)
  int64_t steps = 100;
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  int64_t warmup_steps = 20;
  float final_lr_fraction = 0.1f;
  uint64_t init_seed = 1;
  uint64_t shuffle_seed = 0;  // 0: windows in file order
  int num_threads = 0;        // 0: kernels' default (cores / ranks)
};

// Called after every optimizer step with its 0-based index and the mean loss
// over the step's micro-batches.
using StepCallback = std::function<void(int64_t step, float loss)>;

// The learning rate of 0-based step `step` under `options`' schedule.
float ScheduledLearningRate(const SingleRankTrainOptions& options, int64_t step);

// Trains from scratch and returns every step's loss. The dataset's vocab_size
// must equal options.model.vocab_size. kInvalidArgument for inconsistent
// options (naming them); errors of the layers and kernels otherwise.
absl::StatusOr<std::vector<float>> TrainSingleRank(const TokenDataset& dataset, const SingleRankTrainOptions& options,
                                                   const StepCallback& on_step = nullptr);

}  // namespace zeroshard

#endif  // ZEROSHARD_EXAMPLES_TRAIN_SINGLE_RANK_LOOP_H_
