#include "nn/tensor_checks.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

bool AllBytesAre(const Buffer& buf, unsigned char value) {
  const auto* p = static_cast<const unsigned char*>(buf.data());
  for (int64_t i = 0; i < buf.bytes(); ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

class PoisonOutputsTest : public ::testing::Test {
 protected:
  void TearDown() override { SetPoisonOutputs(false); }
};

// Poisoned, an output buffer holds NaN bytes in every float dtype; a zeroed
// buffer stays zeroed whatever the setting.
TEST_F(PoisonOutputsTest, OutputBuffersHoldNanBytesAndZeroedOnesStayZero) {
  ComputeContext ctx;
  SetPoisonOutputs(true);
  EXPECT_TRUE(PoisonOutputs());
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    auto out = AllocateOutputOnDevice(ctx, MemoryCategory::kWorkspace, dtype, 1031);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->numel(), 1031);
    EXPECT_TRUE(AllBytesAre(*out, 0xFF)) << DTypeName(dtype);
    auto zeroed = AllocateOnDevice(ctx, MemoryCategory::kWorkspace, dtype, 1031);
    ASSERT_TRUE(zeroed.ok()) << zeroed.status();
    EXPECT_TRUE(AllBytesAre(*zeroed, 0)) << DTypeName(dtype);
  }
  float first;
  auto f32 = AllocateOutputOnDevice(ctx, MemoryCategory::kWorkspace, DType::kF32, 4);
  ASSERT_TRUE(f32.ok());
  std::memcpy(&first, f32->data(), sizeof(first));
  EXPECT_NE(first, first);  // NaN
  SetPoisonOutputs(false);
  EXPECT_FALSE(PoisonOutputs());
}

}  // namespace
}  // namespace zeroshard
