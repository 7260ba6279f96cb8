// CPU GEMM through OpenBLAS (see kernels/gemm.h for the contract). Arguments
// are already validated. Also the f32 building block other CPU kernels use.
//
// Threading: OpenBLAS itself always runs single-threaded (its own threading
// splits C by thread count, which changes the bits); TiledSgemm threads a
// product over the fixed tiles of kernels/cpu/gemm_tiles.h instead.
#ifndef ZEROSHARD_KERNELS_CPU_GEMM_CPU_H_
#define ZEROSHARD_KERNELS_CPU_GEMM_CPU_H_

#include <cstdint>

#include "absl/status/status.h"
#include "core/dtype.h"
#include "kernels/transpose.h"

namespace zeroshard::kernels::cpu {

// Sets OpenBLAS to one thread if it is not (idempotent; call it from one
// thread while no sgemm runs, as SetCpuThreads and TiledSgemm do).
void UseSingleThreadedBlas();

// Row-major f32 sgemm as one single-threaded OpenBLAS call: for products
// inside a task that is already on a loop thread (attention's heads).
void SgemmRowMajor(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product over PlanGemmTiles(m, n, k), tiles on up to `threads`
// loop threads: bitwise the same for every thread count.
void TiledSgemm(int threads, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Elements spanned by a row-major matrix of `rows` rows of `cols` with
// leading dimension ld.
inline int64_t StorageExtent(int64_t rows, int64_t cols, int64_t ld) { return (rows - 1) * ld + cols; }

absl::Status Gemm(int threads, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                  DType dtype);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_GEMM_CPU_H_
