#include "sharding/testing/thread_communicator.h"

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Runs fn(rank, comm) on one thread per rank of a fresh group of `size`.
void OnEveryRank(int size, const std::function<void(int, Communicator&)>& fn) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, *comms[r]); });
  for (std::thread& t : threads) t.join();
}

// Element i of block d on rank s: unique per (s, d, i) while it fits a byte.
int Code(int s, int d, int64_t i, int size, int64_t count) { return static_cast<int>((s * size + d) * count + i); }

TEST(ThreadCommunicatorTest, AllGatherAndReductions) {
  OnEveryRank(3, [](int rank, Communicator& comm) {
    std::vector<float> in = {static_cast<float>(rank), static_cast<float>(10 * rank)}, out(6, -1);
    ASSERT_TRUE(comm.AllGather(in.data(), out.data(), 2, DType::kF32)->Wait().ok());
    EXPECT_EQ(out, std::vector<float>({0, 0, 1, 10, 2, 20}));
    std::vector<int32_t> rs_in = {rank, rank + 1, rank + 2}, rs_out(1, -1);
    ASSERT_TRUE(comm.ReduceScatter(rs_in.data(), rs_out.data(), 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
    EXPECT_EQ(rs_out[0], 0 + 1 + 2 + 3 * rank);
    std::vector<float> ar = {static_cast<float>(rank)};
    ASSERT_TRUE(comm.AllReduce(ar.data(), 1, DType::kF32, ReduceOp::kMax)->Wait().ok());
    EXPECT_EQ(ar[0], 2);
  });
}

// f32, i8 and bf16, counts 0, 1 and 7: block d of rank s lands in slot s of
// rank d, in order, and nothing past the output is written.
TEST(ThreadCommunicatorTest, AllToAllDeliversEveryBlockToItsRank) {
  const int size = 3;
  for (DType dtype : {DType::kF32, DType::kI8, DType::kBF16}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " count " << count);
      OnEveryRank(size, [&](int rank, Communicator& comm) {
        const size_t elem = DTypeSize(dtype);
        const int64_t n = size * count;
        std::vector<uint8_t> in(n * elem + 1), out(n * elem + 1, 0x7f);
        auto store = [&](std::vector<uint8_t>& buf, int64_t i, int v) {
          if (dtype == DType::kF32) {
            const float f = static_cast<float>(v);
            std::memcpy(&buf[i * 4], &f, 4);
          } else if (dtype == DType::kBF16) {
            const uint16_t h = F32ToBF16(static_cast<float>(v));
            std::memcpy(&buf[i * 2], &h, 2);
          } else {
            buf[i] = static_cast<uint8_t>(static_cast<int8_t>(v - 128));
          }
        };
        std::vector<uint8_t> want(out);
        for (int d = 0; d < size; ++d) {
          for (int64_t i = 0; i < count; ++i) {
            store(in, d * count + i, Code(rank, d, i, size, count));
            store(want, d * count + i, Code(d, rank, i, size, count));
          }
        }
        ASSERT_TRUE(comm.AllToAll(in.data(), out.data(), count, dtype)->Wait().ok());
        EXPECT_EQ(out, want);
        const CommStats s = comm.Stats();
        EXPECT_EQ(s[CommOp::kAllToAll].calls, 1);
        EXPECT_EQ(s[CommOp::kAllToAll].bytes_sent, (size - 1) * count * static_cast<int64_t>(elem));
        EXPECT_EQ(s[CommOp::kAllToAll].bytes_received, (size - 1) * count * static_cast<int64_t>(elem));
      });
    }
  }
}

// A group of one hands its only block back to itself and counts no bytes.
TEST(ThreadCommunicatorTest, AllToAllOfOneRankCopiesItsBlock) {
  OnEveryRank(1, [](int, Communicator& comm) {
    std::vector<int32_t> in = {4, 5, 6}, out(3, 0);
    ASSERT_TRUE(comm.AllToAll(in.data(), out.data(), 3, DType::kI32)->Wait().ok());
    EXPECT_EQ(out, in);
    EXPECT_EQ(comm.Stats()[CommOp::kAllToAll].calls, 1);
    EXPECT_EQ(comm.Stats().Total().bytes_sent, 0);
  });
}

}  // namespace
}  // namespace zeroshard
