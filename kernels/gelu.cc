#include "kernels/gelu.h"

namespace zeroshard::kernels {

absl::Status GeluForward(const KernelContext& ctx, void* out, const void* inp, int64_t n, DType dtype) {
  return absl::UnimplementedError("GeluForward is not implemented yet");
}

absl::Status GeluBackward(const KernelContext& ctx, void* dinp, const void* inp, const void* dout, int64_t n,
                          DType dtype) {
  return absl::UnimplementedError("GeluBackward is not implemented yet");
}

}  // namespace zeroshard::kernels
