// LayerNorm over the last dimension (GPT-2: eps 1e-5, biased variance).
// N rows; x, y, weight, bias in ctx.compute_dtype; mean and rstd f32 (N).
#ifndef ZEROSHARD_NN_LAYERNORM_H_
#define ZEROSHARD_NN_LAYERNORM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class LayerNorm {
 public:
  LayerNorm(std::string name, int64_t channels, float eps) : name_(std::move(name)), c_(channels), eps_(eps) {}

  // y (N,C) WRITTEN = (x - mean) * rstd * weight + bias; mean, rstd (N) WRITTEN
  // for Backward.
  absl::Status Forward(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                       const TensorView& x, const TensorView& y, const TensorView& mean,
                       const TensorView& rstd) const;

  // dx (N,C) WRITTEN; dweight, dbias (C) ACCUMULATED. dx must not alias dy or x.
  // dx.data null: the parameter gradients only (weight unread, may be an
  // empty view); dweight.data and dbias.data null: the input gradient only.
  // The parts computed are bitwise those of the full call.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& weight, const TensorView& x,
                        const TensorView& mean, const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                        const TensorView& dweight, const TensorView& dbias) const;

 private:
  std::string name_;
  int64_t c_;
  float eps_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_LAYERNORM_H_
