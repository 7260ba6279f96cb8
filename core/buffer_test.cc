#include "core/buffer.h"

#include <utility>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(BufferTest, AllocationIsTrackedUntilResetOrDestruction) {
  MemoryTracker t;
  {
    absl::StatusOr<Buffer> a =
        Buffer::AllocateZeroed(&t, MemoryCategory::kMasterParams, Device::kCpu, DType::kF32, 10);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->bytes(), 40);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(a->as<float>()[i], 0.0f) << "AllocateZeroed contents start zeroed";
    absl::StatusOr<Buffer> b = Buffer::Allocate(&t, MemoryCategory::kMasterParams, Device::kCpu, DType::kBF16, 3);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(t.Usage(MemoryCategory::kMasterParams).current, 46);
    b->Reset();
    EXPECT_EQ(t.Usage(MemoryCategory::kMasterParams).current, 40);
    Buffer moved = std::move(*a);
    EXPECT_EQ(t.Usage(MemoryCategory::kMasterParams).current, 40) << "a move does not double count";
    EXPECT_EQ(moved.numel(), 10);
  }
  EXPECT_EQ(t.Usage(MemoryCategory::kMasterParams).current, 0);
  EXPECT_EQ(t.Usage(MemoryCategory::kMasterParams).peak, 46);
}

// Allocate leaves the bytes as the allocator had them; AllocateZeroed
// clears memory that held other values (the freed block is reused).
TEST(BufferTest, OnlyAllocateZeroedClearsReusedMemory) {
  MemoryTracker t;
  for (int round = 0; round < 3; ++round) {
    {
      Buffer dirty = *Buffer::Allocate(&t, MemoryCategory::kWorkspace, Device::kCpu, DType::kF32, 4096);
      EXPECT_EQ(t.Usage(MemoryCategory::kWorkspace).current, 4096 * 4);
      for (int64_t i = 0; i < dirty.numel(); ++i) dirty.as<float>()[i] = 7.0f;
    }
    Buffer clean = *Buffer::AllocateZeroed(&t, MemoryCategory::kWorkspace, Device::kCpu, DType::kF32, 4096);
    EXPECT_EQ(t.Usage(MemoryCategory::kWorkspace).current, 4096 * 4);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < clean.numel(); ++i) nonzero += clean.as<float>()[i] != 0.0f;
    EXPECT_EQ(nonzero, 0) << "round " << round;
  }
  EXPECT_EQ(t.Usage(MemoryCategory::kWorkspace).current, 0);
}

TEST(BufferTest, NegativeSizeIsInvalidArgument) {
  MemoryTracker t;
  EXPECT_EQ(Buffer::Allocate(&t, MemoryCategory::kGrads, Device::kCpu, DType::kF32, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BufferTest, CudaWithoutGpuIsUnavailableOrWorks) {
  std::string reason;
  if (CudaAvailable(&reason)) {
    MemoryTracker t;
    absl::StatusOr<Buffer> b = Buffer::Allocate(&t, MemoryCategory::kParams, Device::kCuda, DType::kF32, 256);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(t.Usage(MemoryCategory::kParams).current, 1024);
    return;
  }
  GTEST_SKIP() << reason;
}

TEST(TensorViewTest, ViewDescribesItsBuffer) {
  MemoryTracker t;
  Buffer b = *Buffer::Allocate(&t, MemoryCategory::kActivations, Device::kCpu, DType::kF16, 24);
  TensorView v = ViewOf(b, {2, 3, 4});
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.bytes(), 48);
  EXPECT_EQ(v.DebugString(), "f16[2, 3, 4]");
  EXPECT_EQ(v.data, b.data());
}

}  // namespace
}  // namespace zeroshard
