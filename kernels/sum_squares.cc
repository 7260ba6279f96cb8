#include "kernels/sum_squares.h"

namespace zeroshard::kernels {

absl::Status SumOfSquares(const KernelContext& ctx, const void* x, int64_t n, DType dtype, double* result) {
  return absl::UnimplementedError("SumOfSquares is not implemented yet");
}

}  // namespace zeroshard::kernels
