#include "kernels/bias.h"

namespace zeroshard::kernels {

absl::Status BiasAdd(const KernelContext& ctx, void* out, const void* bias, int64_t rows, int64_t cols, DType dtype) {
  return absl::UnimplementedError("BiasAdd is not implemented yet");
}

absl::Status BiasGrad(const KernelContext& ctx, void* dbias, const void* dout, int64_t rows, int64_t cols,
                      DType dtype) {
  return absl::UnimplementedError("BiasGrad is not implemented yet");
}

}  // namespace zeroshard::kernels
