#include "kernels/gemm.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "kernels/checks.h"
#include "kernels/cpu/gemm_cpu.h"
#include "kernels/cuda/launchers.h"

namespace zeroshard::kernels {
namespace {

absl::Status CheckLeadingDim(const char* name, int64_t ld, int64_t min_ld, const char* layout) {
  if (ld < min_ld) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: ", name, " = ", ld, ", expected >= ", min_ld, " (", layout, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Gemm(const KernelContext& ctx, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                  int64_t ldc, DType dtype) {
  RETURN_IF_ERROR(CheckDims("Gemm", {{"m", m}, {"n", n}, {"k", k}}));
  RETURN_IF_ERROR(CheckFitsInt32("Gemm", {{"m", m}, {"n", n}, {"k", k}, {"lda", lda}, {"ldb", ldb}, {"ldc", ldc}}));
  RETURN_IF_ERROR(CheckNotNull("Gemm", {{"a", a}, {"b", b}, {"c", c}}));
  RETURN_IF_ERROR(CheckComputeDType("Gemm", dtype));
  if (trans_a == Transpose::kNo) {
    RETURN_IF_ERROR(CheckLeadingDim("lda", lda, k, "A stored [M,K]"));
  } else {
    RETURN_IF_ERROR(CheckLeadingDim("lda", lda, m, "A stored [K,M] for A^T"));
  }
  if (trans_b == Transpose::kNo) {
    RETURN_IF_ERROR(CheckLeadingDim("ldb", ldb, n, "B stored [K,N]"));
  } else {
    RETURN_IF_ERROR(CheckLeadingDim("ldb", ldb, k, "B stored [N,K] for B^T"));
  }
  RETURN_IF_ERROR(CheckLeadingDim("ldc", ldc, n, "C stored [M,N]"));
  ZS_KERNEL_DISPATCH("Gemm", ctx,
                     cpu::Gemm(LoopThreads(ctx), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype),
                     cuda::Gemm(ctx, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, dtype));
}

}  // namespace zeroshard::kernels
