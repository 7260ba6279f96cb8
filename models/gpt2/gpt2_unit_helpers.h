// Helpers GPT-2's unit files share (private to nn/).
#ifndef ZEROSHARD_MODELS_GPT2_GPT2_UNIT_HELPERS_H_
#define ZEROSHARD_MODELS_GPT2_GPT2_UNIT_HELPERS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/memory_tracker.h"
#include "nn/batch.h"
#include "nn/param_spec.h"
#include "nn/unit.h"

namespace zeroshard::gpt2_internal {

// A view of the same memory with another shape.
TensorView Reshaped(const TensorView& t, std::vector<int64_t> shape);

absl::Status CheckParamCount(const std::string& unit, absl::Span<const TensorView> views, size_t expected,
                             const char* what);

// (B, T) of the batch's inputs; kInvalidArgument unless "inputs" (and
// "targets" when needed) are (B, T) i32 on the compute device.
absl::StatusOr<std::pair<int64_t, int64_t>> BatchShape(const ComputeContext& ctx, const Batch& batch,
                                                      bool need_targets);

// The (B, T, C) activation a block or the head receives: one tensor.
absl::StatusOr<TensorView> OnlyInput(const std::string& unit, absl::Span<const TensorView> in);

// A copy made on the kernels' stream (Cast to the same dtype is a copy), so it
// is ordered after the kernel that produced `src`.
absl::StatusOr<Buffer> CopyOf(const ComputeContext& ctx, const TensorView& src, MemoryCategory category);

ParamSpec Spec(std::string name, std::vector<int64_t> shape, InitKind init, float std = 0.02f);

// `p` marked no_weight_decay: GPT-2's biases and LayerNorm parameters
// (nanoGPT's and Megatron's rule).
ParamSpec NoDecay(ParamSpec p);

// An absent tensor: the layers skip an output whose data is null.
inline const TensorView kNone{};

// A layer whose gradient views are all null (frozen parameters) is skipped.
bool AllNull(std::initializer_list<const TensorView*> grads);

template <typename T>
absl::StatusOr<const T*> WeightInputsAs(const std::string& unit, const SavedActivations& weight_inputs) {
  const auto* w = dynamic_cast<const T*>(&weight_inputs);
  if (w == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(unit, ": weight inputs are not this unit's (pass what its BackwardInput returned)"));
  }
  return w;
}

}  // namespace zeroshard::gpt2_internal

#endif  // ZEROSHARD_MODELS_GPT2_GPT2_UNIT_HELPERS_H_
