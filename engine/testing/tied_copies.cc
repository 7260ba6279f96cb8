#include "engine/testing/tied_copies.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {

bool TiedCopiesEqual(Engine& engine, ProcessGrid& grid) {
  const int stages = grid.shape().pp;
  if (stages == 1 || (grid.pp_rank() != 0 && grid.pp_rank() != stages - 1)) return true;
  EngineStateView& view = engine.state();
  const bool owner = grid.pp_rank() == 0;
  EXPECT_EQ(view.region(0, EngineStateView::kMaster).present, owner) << "stage " << grid.pp_rank();
  const StateRegion params = view.region(0, EngineStateView::kParams);
  std::vector<char> mine(static_cast<size_t>(params.bytes));
  EXPECT_TRUE(view.Read(0, EngineStateView::kParams, 0, params.length, mine.data()).ok());
  std::vector<char> both(2 * mine.size());
  EXPECT_TRUE(grid.embedding().AllGather(mine.data(), both.data(), params.bytes, DType::kI8)->Wait().ok());
  return std::memcmp(both.data(), both.data() + mine.size(), mine.size()) == 0;
}

}  // namespace zeroshard
