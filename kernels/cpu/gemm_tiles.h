// How a CPU GEMM's output C[M,N] is cut into tiles, each computed by one
// single-threaded sgemm call.
//
// The plan is a pure function of (m, n, k): never of the thread count, the
// core type or the machine. Threads only decide which thread runs which
// tile, so every element of C comes from the same sgemm call, with the same
// operands at the same offsets, whatever the threads. That is what makes
// GEMM bitwise independent of the thread count on every OpenBLAS kernel
// (OpenBLAS's own threading splits C by thread count, and its edge kernels
// and K blocking then round differently).
//
// Cost model: a tile repacks its panels of A and B, so blocks stay large
// (>= kMinBlock along a split side) and each tile has enough work
// (>= kMinTileMacs multiply-adds) to amortise packing and the fork/join.
// Block extents are multiples of kBlockAlign where that keeps the count, so
// mostly only the matrix's own edge reaches the kernels' narrow edge paths. The count is a power of two at
// most kMaxTiles, which keeps power-of-two thread counts balanced.
#ifndef ZEROSHARD_KERNELS_CPU_GEMM_TILES_H_
#define ZEROSHARD_KERNELS_CPU_GEMM_TILES_H_

#include <cstdint>

namespace zeroshard::kernels::cpu {

// Chosen on the GPT-2 124M step (bench/single_rank): on Haswell and SkylakeX
// kernels the tiled products run within a few percent of OpenBLAS's own
// threading, and the whole step is faster (no OpenBLAS threads competing
// with the loop threads).
inline constexpr int64_t kMinTileMacs = int64_t{1} << 22;
inline constexpr int64_t kMinBlock = 256;
inline constexpr int64_t kBlockAlign = 16;  // the x86 sgemm kernels' unroll
inline constexpr int64_t kMaxTiles = 64;

struct GemmTiles {
  int64_t row_block = 0;  // rows of C per tile; the last row of tiles may be shorter
  int64_t col_block = 0;  // columns of C per tile; likewise
  int64_t row_tiles = 1;
  int64_t col_tiles = 1;

  int64_t count() const { return row_tiles * col_tiles; }
};

// m, n, k >= 1.
GemmTiles PlanGemmTiles(int64_t m, int64_t n, int64_t k);

}  // namespace zeroshard::kernels::cpu

#endif  // ZEROSHARD_KERNELS_CPU_GEMM_TILES_H_
