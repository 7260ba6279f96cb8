#include "nn/unit.h"

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(UnitRngKeyTest, IsAPureFunctionOfItsFourArguments) {
  EXPECT_EQ(UnitRngKey(7, 3, 1, 2), UnitRngKey(7, 3, 1, 2));
  // Changing any one argument changes the key (no collisions over a grid).
  std::set<uint64_t> keys;
  int n = 0;
  for (uint64_t seed : {0ull, 1ull, 1234ull}) {
    for (int64_t step : {-1, 0, 1, 2}) {
      for (int mb : {0, 1, 2}) {
        for (int unit : {0, 1, 5}) {
          keys.insert(UnitRngKey(seed, step, mb, unit));
          ++n;
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(keys.size()), n);
  // Swapping micro-batch and unit is another key.
  EXPECT_NE(UnitRngKey(1, 1, 2, 3), UnitRngKey(1, 1, 3, 2));
}

TEST(ActivationPackTest, HoldsBuffersWithShapesAndCountsTheirBytes) {
  MemoryTracker tracker;
  ActivationPack pack;
  EXPECT_TRUE(pack.empty());
  pack.Add(std::move(Buffer::AllocateZeroed(&tracker, MemoryCategory::kActivations, Device::kCpu, DType::kF32, 6)).value(),
           {2, 3});
  pack.Add(std::move(Buffer::AllocateZeroed(&tracker, MemoryCategory::kActivations, Device::kCpu, DType::kBF16, 4)).value(),
           {4});
  ASSERT_EQ(pack.size(), 2);
  const std::vector<TensorView> views = pack.views();
  EXPECT_EQ(views[0].DebugString(), "f32[2, 3]");
  EXPECT_EQ(views[1].DebugString(), "bf16[4]");
  EXPECT_EQ(views[0].data, pack.buffer(0).data());
  EXPECT_EQ(pack.bytes(), 6 * 4 + 4 * 2);
  EXPECT_EQ(tracker.Usage(MemoryCategory::kActivations).current, 32);
  ActivationPack moved = std::move(pack);
  EXPECT_EQ(moved.size(), 2);
  moved.Clear();
  EXPECT_TRUE(moved.empty());
  EXPECT_EQ(tracker.Usage(MemoryCategory::kActivations).current, 0);
}

TEST(ResolveLossTermsTest, ReadsDeviceSumsIntoLossAndMetrics) {
  LossTerms host;
  host.loss = WeightedSum{3.5, 2};
  absl::StatusOr<LossTerms> same = ResolveLossTerms(host);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->loss.sum, 3.5);
  EXPECT_EQ(same->loss.weight, 2);

  // The layout a device unit leaves: loss (sum, weight), then each metric's.
  auto sums = std::make_shared<Buffer>(
      std::move(Buffer::Allocate(nullptr, MemoryCategory::kWorkspace, Device::kCpu, DType::kF32, 4)).value());
  const float values[4] = {12.25f, 8.0f, 5.0f, 8.0f};
  std::copy(values, values + 4, sums->as<float>());
  LossTerms on_device;
  on_device.device_sums = sums;
  absl::StatusOr<LossTerms> read = ResolveLossTerms(on_device);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->loss.sum, 12.25);
  EXPECT_EQ(read->loss.weight, 8.0);
  ASSERT_EQ(read->metrics.size(), 1u);
  EXPECT_EQ(read->metrics[0].sum, 5.0);
  EXPECT_EQ(read->metrics[0].weight, 8.0);
  EXPECT_EQ(read->device_sums, nullptr);

  on_device.device_sums = std::make_shared<Buffer>(
      std::move(Buffer::Allocate(nullptr, MemoryCategory::kWorkspace, Device::kCpu, DType::kF32, 3)).value());
  absl::StatusOr<LossTerms> odd = ResolveLossTerms(on_device);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.status().message(),
            "LossTerms::device_sums holds 3 f32 values, expected an even count >= 2 of f32");
}

}  // namespace
}  // namespace zeroshard
