#include "kernels/gemm.h"

namespace zeroshard::kernels {

absl::Status Gemm(const KernelContext& ctx, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                  int64_t ldc, DType dtype) {
  return absl::UnimplementedError("Gemm is not implemented yet");
}

}  // namespace zeroshard::kernels
