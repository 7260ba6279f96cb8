#include "nn/layernorm.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/layernorm.h"
#include "nn/tensor_checks.h"

namespace zeroshard {

absl::Status LayerNorm::Forward(const ComputeContext& ctx, const TensorView& weight, const TensorView& bias,
                                const TensorView& x, const TensorView& y, const TensorView& mean,
                                const TensorView& rstd) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = x.shape.size() == 2 ? x.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(x, absl::StrCat(name_, " input"), dt, {n, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(weight, absl::StrCat(name_, ".weight"), dt, {c_}, dev));
  RETURN_IF_ERROR(CheckTensor(bias, absl::StrCat(name_, ".bias"), dt, {c_}, dev));
  RETURN_IF_ERROR(CheckTensor(y, absl::StrCat(name_, " output"), dt, {n, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(mean, absl::StrCat(name_, " mean"), DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(rstd, absl::StrCat(name_, " rstd"), DType::kF32, {n}, dev));
  return kernels::LayerNormForward(ctx.kernels, y.data, mean.as<float>(), rstd.as<float>(), x.data, weight.data,
                                   bias.data, n, c_, eps_, dt);
}

absl::Status LayerNorm::Backward(const ComputeContext& ctx, const TensorView& weight, const TensorView& x,
                                 const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                                 const TensorView& dx, const TensorView& dweight, const TensorView& dbias) const {
  const DType dt = ctx.compute_dtype;
  const Device dev = ctx.kernels.device;
  const int64_t n = x.shape.size() == 2 ? x.shape[0] : -1;
  RETURN_IF_ERROR(CheckTensor(x, absl::StrCat(name_, " input"), dt, {n, c_}, dev));
  RETURN_IF_ERROR(CheckTensor(mean, absl::StrCat(name_, " mean"), DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(rstd, absl::StrCat(name_, " rstd"), DType::kF32, {n}, dev));
  RETURN_IF_ERROR(CheckTensor(dy, absl::StrCat(name_, " output grad"), dt, {n, c_}, dev));
  if (dx.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(weight, absl::StrCat(name_, ".weight"), dt, {c_}, dev));
    RETURN_IF_ERROR(CheckTensor(dx, absl::StrCat(name_, " input grad"), dt, {n, c_}, dev));
  }
  if (dweight.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dweight, absl::StrCat(name_, ".weight grad"), dt, {c_}, dev));
  }
  if (dbias.data != nullptr) {
    RETURN_IF_ERROR(CheckTensor(dbias, absl::StrCat(name_, ".bias grad"), dt, {c_}, dev));
  }
  return kernels::LayerNormBackward(ctx.kernels, dx.data, dweight.data, dbias.data, dy.data, x.data, weight.data,
                                    mean.as<const float>(), rstd.as<const float>(), n, c_, dt);
}

}  // namespace zeroshard
