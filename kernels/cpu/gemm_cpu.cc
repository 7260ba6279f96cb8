#include "kernels/cpu/gemm_cpu.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/f32_staging.h"
#include "kernels/cpu/gemm_tiles.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/float_types.h"

namespace zeroshard::kernels::cpu {

void UseSingleThreadedBlas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void SgemmRowMajor(Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a == Transpose::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Transpose::kYes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void TiledSgemm(int threads, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  UseSingleThreadedBlas();
  const GemmTiles tiles = PlanGemmTiles(m, n, k);
  RunChunks(threads, tiles.count(), [&](int64_t tile) {
    const int64_t i0 = (tile / tiles.col_tiles) * tiles.row_block;
    const int64_t j0 = (tile % tiles.col_tiles) * tiles.col_block;
    const int64_t rows = std::min(tiles.row_block, m - i0), cols = std::min(tiles.col_block, n - j0);
    // Rows i0.. of op(A): A's rows, or A^T's columns; columns j0.. of op(B) likewise.
    const float* a_tile = trans_a == Transpose::kNo ? a + i0 * lda : a + i0;
    const float* b_tile = trans_b == Transpose::kNo ? b + j0 : b + j0 * ldb;
    SgemmRowMajor(trans_a, trans_b, rows, cols, k, alpha, a_tile, lda, b_tile, ldb, beta, c + i0 * ldc + j0, ldc);
  });
}

absl::Status Gemm(int threads, Transpose trans_a, Transpose trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                  DType dtype) {
  return DispatchFloatDType(dtype, "Gemm", [&](auto tag) {
    using T = decltype(tag);
    int64_t a_rows = trans_a == Transpose::kNo ? m : k, a_cols = trans_a == Transpose::kNo ? k : m;
    int64_t b_rows = trans_b == Transpose::kNo ? k : n, b_cols = trans_b == Transpose::kNo ? n : k;
    F32Input<T> a32(threads, static_cast<const T*>(a), StorageExtent(a_rows, a_cols, lda));
    F32Input<T> b32(threads, static_cast<const T*>(b), StorageExtent(b_rows, b_cols, ldb));
    // Gaps between rows (ldc > n) belong to someone else: load them so the
    // round trip writes them back unchanged.
    F32Output<T> c32(threads, static_cast<T*>(c), StorageExtent(m, n, ldc), /*load=*/beta != 0.0f || ldc != n);
    TiledSgemm(threads, trans_a, trans_b, m, n, k, alpha, a32.get(), lda, b32.get(), ldb, beta, c32.get(), ldc);
    c32.Commit();
    return absl::OkStatus();
  });
}

}  // namespace zeroshard::kernels::cpu
