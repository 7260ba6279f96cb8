// Linear layer y = x · W + b with W stored [in, out] (Hugging Face Conv1D).
// N rows (B*T). Parameters and activations in ctx.compute_dtype.
#ifndef ZEROSHARD_NN_LINEAR_H_
#define ZEROSHARD_NN_LINEAR_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nn/unit.h"

namespace zeroshard {

class Linear {
 public:
  // `name` prefixes error messages, e.g. "h.0.attn.c_attn".
  Linear(std::string name, int64_t in_features, int64_t out_features)
      : name_(std::move(name)), in_(in_features), out_(out_features) {}

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  // y (N,out) WRITTEN = x (N,in) · weight (in,out) + bias (out). bias.data
  // null: no bias (a row-parallel layer adds it after its tp reduction).
  absl::Status Forward(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                       const TensorView& x, const TensorView& y) const;

  // pre (N,out) WRITTEN = x · weight + bias and y (N,out) WRITTEN =
  // gelu(pre) (tanh approximation), in one fused kernel where the device
  // has one (kernels/linear.h). pre is what Gelu::Backward reads. CPU:
  // bitwise Forward into pre, then Gelu::Forward. bias.data may be null.
  absl::Status ForwardGelu(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                           const TensorView& x, const TensorView& pre, const TensorView& y) const;

  // dx (N,in) WRITTEN; dweight (in,out) and dbias (out) ACCUMULATED. x and
  // weight are the forward's. Each output whose data is null is skipped
  // (weight is read only for dx, x only for dweight, and may then be empty
  // views); the parts computed are bitwise those of the full call.
  absl::Status Backward(const ComputeContext& ctx, const TensorView& weight, const TensorView& x,
                        const TensorView& dy, const TensorView& dx, const TensorView& dweight,
                        const TensorView& dbias) const;

 private:
  // Checks x (N, in), weight, bias (if set) and every output (N, out);
  // returns N.
  absl::StatusOr<int64_t> CheckForward(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                                       const TensorView& x,
                                       std::initializer_list<std::pair<const TensorView*, const char*>> outputs) const;
  std::string name_;
  int64_t in_;
  int64_t out_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_LINEAR_H_
