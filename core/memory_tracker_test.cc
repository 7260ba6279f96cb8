#include "core/memory_tracker.h"

#include "core/buffer.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(MemoryTrackerTest, InterleavedAllocationsKeepCurrentAndPeakPerCategory) {
  MemoryTracker t;
  t.Allocated(MemoryCategory::kParams, 100);
  t.Allocated(MemoryCategory::kGrads, 40);
  t.Allocated(MemoryCategory::kParams, 50);  // params 150, total 190
  t.Freed(MemoryCategory::kParams, 100);     // params 50, total 90
  t.Allocated(MemoryCategory::kActivations, 70);  // total 160
  t.Freed(MemoryCategory::kGrads, 40);            // total 120
  t.Allocated(MemoryCategory::kGrads, 10);        // total 130

  EXPECT_EQ(t.Usage(MemoryCategory::kParams).current, 50);
  EXPECT_EQ(t.Usage(MemoryCategory::kParams).peak, 150);
  EXPECT_EQ(t.Usage(MemoryCategory::kGrads).current, 10);
  EXPECT_EQ(t.Usage(MemoryCategory::kGrads).peak, 40);
  EXPECT_EQ(t.Usage(MemoryCategory::kActivations).current, 70);
  EXPECT_EQ(t.Usage(MemoryCategory::kActivations).peak, 70);
  EXPECT_EQ(t.Usage(MemoryCategory::kOptimizerState).peak, 0);
  EXPECT_EQ(t.Total().current, 130);
  EXPECT_EQ(t.Total().peak, 190);

  t.ResetPeaks();
  EXPECT_EQ(t.Usage(MemoryCategory::kParams).peak, 50);
  EXPECT_EQ(t.Total().peak, 130);
  t.Allocated(MemoryCategory::kWorkspace, 5);
  EXPECT_EQ(t.Total().peak, 135);
}

TEST(MemoryTrackerTest, CategoryNamesAreTheMetricsKeys) {
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kParams), "params");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kMasterParams), "master_params");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kGrads), "grads");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kOptimizerState), "optimizer_state");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kActivations), "activations");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kCommBuffers), "comm_buffers");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kWorkspace), "workspace");
  EXPECT_STREQ(MemoryCategoryName(MemoryCategory::kOffloadStaging), "offload_staging");
}

TEST(MemoryTrackerTest, ALimitRefusesWhatWouldPassItAndCountsNothing) {
  MemoryTracker t;
  t.SetLimit(MemoryCategory::kCommBuffers, 100);
  EXPECT_TRUE(t.Reserve(MemoryCategory::kCommBuffers, 60).ok());
  absl::Status s = t.Reserve(MemoryCategory::kCommBuffers, 41);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "allocating 41 bytes of comm_buffers (60 in use) exceeds its limit of 100 bytes");
  EXPECT_EQ(t.Usage(MemoryCategory::kCommBuffers).current, 60);
  EXPECT_TRUE(t.Reserve(MemoryCategory::kCommBuffers, 40).ok()) << "exactly the limit fits";
  EXPECT_TRUE(t.Reserve(MemoryCategory::kGrads, 1000).ok()) << "other categories are not limited";
  t.SetLimit(MemoryCategory::kCommBuffers, -1);
  EXPECT_TRUE(t.Reserve(MemoryCategory::kCommBuffers, 1 << 20).ok());
}

TEST(MemoryTrackerTest, BufferAllocationFailsAtTheLimitAndLeavesNothingCounted) {
  MemoryTracker t;
  t.SetLimit(MemoryCategory::kParams, 64);
  absl::StatusOr<Buffer> ok = Buffer::AllocateZeroed(&t, MemoryCategory::kParams, Device::kCpu, DType::kF32, 16);
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<Buffer> too_big = Buffer::AllocateZeroed(&t, MemoryCategory::kParams, Device::kCpu, DType::kF32, 1);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(t.Usage(MemoryCategory::kParams).current, 64);
  ok->Reset();
  EXPECT_EQ(t.Usage(MemoryCategory::kParams).current, 0);
}

}  // namespace
}  // namespace zeroshard
