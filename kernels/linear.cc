#include "kernels/linear.h"

namespace zeroshard::kernels {

absl::Status LinearForward(const KernelContext& ctx, void* out, const void* inp, const void* weight,
                           const void* bias, int64_t rows, int64_t in_features, int64_t out_features, DType dtype) {
  return absl::UnimplementedError("LinearForward is not implemented yet");
}

absl::Status LinearBackward(const KernelContext& ctx, void* dinp, void* dweight, void* dbias, const void* dout,
                            const void* inp, const void* weight, int64_t rows, int64_t in_features,
                            int64_t out_features, DType dtype) {
  return absl::UnimplementedError("LinearBackward is not implemented yet");
}

}  // namespace zeroshard::kernels
