// GELU with GPT-2's tanh approximation, element-wise, in ctx.compute_dtype.
#ifndef ZEROSHARD_NN_GELU_H_
#define ZEROSHARD_NN_GELU_H_

#include "absl/status/status.h"
#include "nn/unit.h"

namespace zeroshard {

class Gelu {
 public:
  // y WRITTEN = gelu(x); same shape.
  absl::Status Forward(const ComputeContext& ctx, const TensorView& x, const TensorView& y) const;
  // dx WRITTEN = gelu'(x) * dy; dx may alias dy.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& x, const TensorView& dy,
                        const TensorView& dx) const;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_GELU_H_
