// General matrix multiply, row-major, every transpose combination.
//
//   C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C[M,N]
//
// Layout (row-major, leading dimension = distance between rows):
//   op(A) = A   : A stored [M,K], lda >= K      op(A) = A^T : A stored [K,M], lda >= M
//   op(B) = B   : B stored [K,N], ldb >= N      op(B) = B^T : B stored [N,K], ldb >= K
//   C stored [M,N], ldc >= N.
// A, B and C share `dtype` (f32, bf16 or f16); products accumulate in f32 and
// C is rounded to `dtype` once. beta == 0 never reads C (NaN in C is fine).
//
// CPU: OpenBLAS cblas_sgemm (bf16/f16 operands are widened to f32 copies
// first). CUDA: cublasGemmEx with CUBLAS_COMPUTE_32F.
//
// How the layers use it (x (N,C), W (C,OC) stored [in, out] like HF Conv1D):
//   forward        y  = x · W            Gemm(kNo,  kNo,  N,  OC, C,  1, x, C,  W, OC, 0, y, OC)
//   input grad     dx = dy · W^T         Gemm(kNo,  kYes, N,  C,  OC, 1, dy, OC, W, OC, 0, dx, C)
//   weight grad    dW += x^T · dy        Gemm(kYes, kNo,  C,  OC, N,  1, x, C,  dy, OC, 1, dW, OC)
// Tied LM head with wte (V,C): logits = x · wte^T is Gemm(kNo, kYes, N, V, C, ...),
//   dx = dlogits · wte is Gemm(kNo, kNo, N, C, V, ...),
//   dwte += dlogits^T · x is Gemm(kYes, kNo, V, C, N, ..., beta=1, ...).
//
// Determinism: on the CPU, C is cut into tiles fixed by (M, N, K) alone
// (kernels/cpu/gemm_tiles.h), each one single-threaded OpenBLAS call, so
// results are bitwise repeatable and equal for every thread count on every
// OpenBLAS core type. Different core types round differently.
#ifndef ZEROSHARD_KERNELS_GEMM_H_
#define ZEROSHARD_KERNELS_GEMM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/context.h"
#include "kernels/transpose.h"

namespace zeroshard::kernels {

// kInvalidArgument when m, n or k < 1 or > INT32_MAX, a leading dimension is
// smaller than the layout above needs, a pointer is null, or dtype is not a
// compute dtype. kFailedPrecondition on kCuda without ctx.cublas_handle.
absl::Status Gemm(const KernelContext& ctx, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                  int64_t ldc, DType dtype);

}  // namespace zeroshard::kernels

#endif  // ZEROSHARD_KERNELS_GEMM_H_
