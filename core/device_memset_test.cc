// DeviceMemset on the host: every byte of the range set, none outside it, at
// any thread count and for sizes that do not split evenly.
#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/host_memset_threads.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(DeviceMemset, HostSetsExactlyTheRangeAtEveryThreadCount) {
  constexpr size_t kGuard = 64;
  // 0 bytes, one byte, below one thread's share, and several shares plus an odd tail.
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{3} << 20, (size_t{37} << 20) + 13}) {
    for (int threads : {1, 2, 3, 5}) {
      SetHostMemsetThreads(threads);
      std::vector<uint8_t> buf(bytes + 2 * kGuard, 0xA5);
      ASSERT_TRUE(DeviceMemset(buf.data() + kGuard, Device::kCpu, 0x3C, bytes).ok());
      size_t wrong_inside = 0, wrong_outside = 0;
      for (size_t i = 0; i < buf.size(); ++i) {
        const bool inside = i >= kGuard && i < kGuard + bytes;
        if (inside && buf[i] != 0x3C) ++wrong_inside;
        if (!inside && buf[i] != 0xA5) ++wrong_outside;
      }
      EXPECT_EQ(wrong_inside, 0u) << bytes << " bytes, " << threads << " threads";
      EXPECT_EQ(wrong_outside, 0u) << bytes << " bytes, " << threads << " threads";
    }
  }
  SetHostMemsetThreads(1);
}

}  // namespace
}  // namespace zeroshard
