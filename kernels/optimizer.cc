#include "kernels/optimizer.h"

namespace zeroshard::kernels {

absl::Status AdamWUpdate(const KernelContext& ctx, float* param, const float* grad, float* exp_avg,
                         float* exp_avg_sq, int64_t n, const AdamWHyper& h) {
  return absl::UnimplementedError("AdamWUpdate is not implemented yet");
}

absl::Status SgdUpdate(const KernelContext& ctx, float* param, const float* grad, float* momentum_buf, int64_t n,
                       const SgdHyper& h) {
  return absl::UnimplementedError("SgdUpdate is not implemented yet");
}

}  // namespace zeroshard::kernels
