// Runs a Model on one rank with every parameter resident: the plain
// single-rank path (tests, examples/train_single_rank, bench/single_rank).
// The sharding engine does the same walk with gathered parameters.
//
// Per unit, parameters and gradients each live in one flat buffer in
// params() order (kParams, kGrads), like a gathered FSDP unit. Only f32
// compute is supported here (parameters double as the AdamW master copy).
// Not thread-safe; the model must outlive the ResidentModel.
#ifndef ZEROSHARD_NN_RESIDENT_MODEL_H_
#define ZEROSHARD_NN_RESIDENT_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/buffer.h"
#include "nn/model.h"
#include "nn/unit.h"

namespace zeroshard {

class ResidentModel {
 public:
  // Allocates zeroed parameters and gradients on ctx.kernels.device.
  // kInvalidArgument unless ctx.compute_dtype is f32, bf16 or f16; errors of
  // Model::Validate.
  static absl::StatusOr<ResidentModel> Create(const Model* model, const ComputeContext& ctx);

  // Every parameter = InitParam(spec, seed), rounded to the compute dtype.
  absl::Status InitParams(uint64_t seed);
  // Sets every parameter from f32 host values, in the order of
  // CopyParamsToHost (units in order, each unit's flat buffer).
  absl::Status SetParamsFromHost(const std::vector<float>& values);
  // All parameters / gradients widened to f32, units in order.
  absl::StatusOr<std::vector<float>> CopyParamsToHost();
  absl::StatusOr<std::vector<float>> CopyGradsToHost();
  absl::Status ZeroGrads();

  // The last unit's loss terms for the batch (forward only; nothing kept).
  // The mean loss is loss.sum / loss.weight.
  absl::StatusOr<LossTerms> Forward(const Batch& batch);
  // Forward, then backward with d(objective)/d(loss sum) = dsum (1/weight
  // gives the gradient of the mean); gradients ACCUMULATE into grads. A
  // frozen parameter's gradient view is null in Backward, so its gradient
  // stays zero.
  absl::StatusOr<LossTerms> ForwardBackward(const Batch& batch, float dsum);

  const Model& model() const { return *model_; }
  const ComputeContext& ctx() const { return ctx_; }
  int num_units() const { return static_cast<int>(params_.size()); }
  // Flat buffers of unit u in the compute dtype (numel = sum of its params' numel).
  Buffer& unit_params(int u) { return params_[u]; }
  Buffer& unit_grads(int u) { return grads_[u]; }
  // Views of one parameter / its gradient, located by Model::FindParam.
  TensorView param(ParamLocation loc);
  TensorView grad(ParamLocation loc);

 private:
  ResidentModel() = default;
  // Owned params of unit u followed by its borrowed params.
  std::vector<TensorView> UnitViews(int u, bool grads);
  absl::StatusOr<LossTerms> Run(const Batch& batch, bool backward, float dsum);
  absl::StatusOr<std::vector<float>> CopyToHost(std::vector<Buffer>& buffers);

  const Model* model_ = nullptr;
  ComputeContext ctx_;
  std::vector<Buffer> params_;
  std::vector<Buffer> grads_;
  std::vector<std::vector<int64_t>> offsets_;            // per unit, per param
  std::vector<std::vector<ParamLocation>> borrowed_;    // per unit
};

}  // namespace zeroshard

#endif  // ZEROSHARD_NN_RESIDENT_MODEL_H_
