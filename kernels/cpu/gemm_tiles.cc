#include "kernels/cpu/gemm_tiles.h"

namespace zeroshard::kernels::cpu {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The block for `tiles` tiles over `extent`: rounded up to kBlockAlign
// unless that would leave fewer tiles than asked for.
int64_t Block(int64_t extent, int64_t tiles) {
  const int64_t even = CeilDiv(extent, tiles);
  const int64_t aligned = CeilDiv(even, kBlockAlign) * kBlockAlign;
  return CeilDiv(extent, aligned) == tiles ? aligned : even;
}

}  // namespace

GemmTiles PlanGemmTiles(int64_t m, int64_t n, int64_t k) {
  // In double: m * n * k can exceed int64 (each may reach INT32_MAX).
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int64_t budget = 1;
  while (budget * 2 <= kMaxTiles && macs >= static_cast<double>(budget * 2) * kMinTileMacs) budget *= 2;

  GemmTiles t;
  // Halve the side whose blocks are longer: splitting C's columns repacks A
  // once per tile and splitting its rows repacks B, so this repacks the
  // smaller operand.
  while (t.count() * 2 <= budget) {
    const bool rows_can = m / (t.row_tiles * 2) >= kMinBlock;
    const bool cols_can = n / (t.col_tiles * 2) >= kMinBlock;
    if (!rows_can && !cols_can) break;
    if (cols_can && (!rows_can || n / t.col_tiles >= m / t.row_tiles)) {
      t.col_tiles *= 2;
    } else {
      t.row_tiles *= 2;
    }
  }
  t.row_block = Block(m, t.row_tiles);
  t.col_block = Block(n, t.col_tiles);
  t.row_tiles = CeilDiv(m, t.row_block);
  t.col_tiles = CeilDiv(n, t.col_block);
  return t;
}

}  // namespace zeroshard::kernels::cpu
