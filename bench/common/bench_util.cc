#include "bench/common/bench_util.h"

namespace zeroshard::bench {

std::vector<std::vector<int64_t>> AllRanks(Communicator& world, const std::vector<int64_t>& mine) {
  // Each int64 as two i32 halves: the gather moves i32.
  std::vector<int32_t> words(2 * mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    words[2 * i] = static_cast<int32_t>(static_cast<uint32_t>(mine[i] & 0xffffffff));
    words[2 * i + 1] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(mine[i]) >> 32));
  }
  std::vector<int32_t> all(words.size() * world.size());
  CheckOrExit(world.AllGather(words.data(), all.data(), static_cast<int64_t>(words.size()), DType::kI32)->Wait(),
              "AllGather");
  std::vector<std::vector<int64_t>> out(world.size(), std::vector<int64_t>(mine.size()));
  for (int r = 0; r < world.size(); ++r) {
    for (size_t i = 0; i < mine.size(); ++i) {
      const int32_t* w = &all[(r * mine.size() + i) * 2];
      out[r][i] = static_cast<int64_t>(static_cast<uint64_t>(static_cast<uint32_t>(w[0])) |
                                       (static_cast<uint64_t>(static_cast<uint32_t>(w[1])) << 32));
    }
  }
  return out;
}

}  // namespace zeroshard::bench
