#include "kernels/cast.h"

namespace zeroshard::kernels {

absl::Status Cast(const KernelContext& ctx, void* out, DType out_dtype, const void* in, DType in_dtype, int64_t n) {
  return absl::UnimplementedError("Cast is not implemented yet");
}

}  // namespace zeroshard::kernels
