#include "kernels/layernorm.h"

namespace zeroshard::kernels {

absl::Status LayerNormForward(const KernelContext& ctx, void* out, float* mean, float* rstd, const void* inp,
                              const void* weight, const void* bias, int64_t rows, int64_t channels, float eps,
                              DType dtype) {
  return absl::UnimplementedError("LayerNormForward is not implemented yet");
}

absl::Status LayerNormBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                               const void* inp, const void* weight, const float* mean, const float* rstd,
                               int64_t rows, int64_t channels, DType dtype) {
  return absl::UnimplementedError("LayerNormBackward is not implemented yet");
}

}  // namespace zeroshard::kernels
