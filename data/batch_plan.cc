#include "data/batch_plan.h"

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

absl::Status BatchPlan::Validate() const {
  if (batch_size <= 0 || dp <= 0 || accumulation_steps <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch plan needs positive batch_size, dp, accumulation_steps, "
                                                   "seq_len; got ",
                                                   batch_size, ", ", dp, ", ", accumulation_steps, ", ", seq_len));
  }
  if (batch_size % (dp * accumulation_steps) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size ", batch_size,
                                                   " is not a multiple of dp * accumulation_steps = ", dp, " * ",
                                                   accumulation_steps, " = ", dp * accumulation_steps));
  }
  return absl::OkStatus();
}

MicroBatchSlot SlotOfSequence(const BatchPlan& plan, int64_t j) {
  const int64_t b = plan.micro_batch_size();
  return MicroBatchSlot{j / (plan.dp * b), (j / b) % plan.dp, j % b};
}

int64_t SequenceOfSlot(const BatchPlan& plan, int64_t micro_index, int64_t dp_rank, int64_t row) {
  const int64_t b = plan.micro_batch_size();
  return micro_index * plan.dp * b + dp_rank * b + row;
}

absl::StatusOr<BatchSource> BatchSource::Create(const TokenDataset* dataset, const BatchPlan& plan) {
  RETURN_IF_ERROR(plan.Validate());
  if (dataset->num_tokens() < plan.seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrCat(dataset->source(), " holds ", dataset->num_tokens(),
                                                   " tokens, fewer than one sequence of seq_len + 1 = ",
                                                   plan.seq_len + 1));
  }
  BatchSource src;
  src.dataset_ = dataset;
  src.plan_ = plan;
  src.num_windows_ = (dataset->num_tokens() - 1) / plan.seq_len;
  return src;
}

int64_t BatchSource::WindowStart(int64_t g) {
  const int64_t epoch = g / num_windows_;
  int64_t w = g % num_windows_;
  if (plan_.shuffle_seed != 0) {
    if (epoch != cached_epoch_) {
      order_.resize(static_cast<size_t>(num_windows_));
      std::iota(order_.begin(), order_.end(), int64_t{0});
      uint64_t state = plan_.shuffle_seed ^ (0xd1b54a32d192ed03ull * static_cast<uint64_t>(epoch + 1));
      for (int64_t i = num_windows_ - 1; i > 0; --i) {
        const int64_t k = static_cast<int64_t>(SplitMix64(state) % static_cast<uint64_t>(i + 1));
        std::swap(order_[i], order_[k]);
      }
      cached_epoch_ = epoch;
    }
    w = order_[static_cast<size_t>(w)];
  }
  return w * plan_.seq_len;
}

absl::Status BatchSource::GetMicroBatch(int64_t step, int64_t micro_index, int64_t dp_rank,
                                        absl::Span<int32_t> tokens) {
  const int64_t b = plan_.micro_batch_size();
  const int64_t t1 = plan_.seq_len + 1;
  if (step < 0 || micro_index < 0 || micro_index >= plan_.accumulation_steps || dp_rank < 0 ||
      dp_rank >= plan_.dp) {
    return absl::InvalidArgumentError(absl::StrCat("micro-batch (step ", step, ", micro ", micro_index, ", rank ",
                                                   dp_rank, ") outside step >= 0, micro < ",
                                                   plan_.accumulation_steps, ", rank < ", plan_.dp));
  }
  if (static_cast<int64_t>(tokens.size()) != b * t1) {
    return absl::InvalidArgumentError(
        absl::StrCat("token buffer holds ", tokens.size(), " ints, expected B*(T+1) = ", b * t1));
  }
  const auto all = dataset_->tokens();
  for (int64_t row = 0; row < b; ++row) {
    const int64_t g = step * plan_.batch_size + SequenceOfSlot(plan_, micro_index, dp_rank, row);
    const int64_t start = WindowStart(g);
    for (int64_t t = 0; t < t1; ++t) tokens[row * t1 + t] = all[start + t];
  }
  return absl::OkStatus();
}

absl::Status BatchSource::GetInputsTargets(int64_t step, int64_t micro_index, int64_t dp_rank,
                                           absl::Span<int32_t> inputs, absl::Span<int32_t> targets) {
  const int64_t b = plan_.micro_batch_size();
  const int64_t t = plan_.seq_len;
  if (static_cast<int64_t>(inputs.size()) != b * t || static_cast<int64_t>(targets.size()) != b * t) {
    return absl::InvalidArgumentError(absl::StrCat("inputs/targets hold ", inputs.size(), "/", targets.size(),
                                                   " ints, expected B*T = ", b * t));
  }
  std::vector<int32_t> tokens(static_cast<size_t>(b * (t + 1)));
  RETURN_IF_ERROR(GetMicroBatch(step, micro_index, dp_rank, absl::MakeSpan(tokens)));
  for (int64_t row = 0; row < b; ++row) {
    for (int64_t i = 0; i < t; ++i) {
      inputs[row * t + i] = tokens[row * (t + 1) + i];
      targets[row * t + i] = tokens[row * (t + 1) + i + 1];
    }
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
