#include "kernels/scale.h"

namespace zeroshard::kernels {

absl::Status ScaleInPlace(const KernelContext& ctx, void* x, int64_t n, DType dtype, float scale,
                          bool* found_nonfinite) {
  return absl::UnimplementedError("ScaleInPlace is not implemented yet");
}

}  // namespace zeroshard::kernels
