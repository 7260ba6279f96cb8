// GPU against CPU at dp 1 (tools/gpu-check, part "parity"): 20 steps of
// GPT-2 tiny in f32 (cuBLAS without TF32) give losses within 1e-4 relative
// of the CPU's; bf16 within the precision tests' tolerance; a checkpoint
// saved on the GPU loads on the CPU with bitwise the same weights and
// optimizer state, and the reverse. Skips without a usable GPU.
#include <cmath>
#include <cstdlib>
#include <string>

#include "checkpoint/engine_checkpoint.h"
#include "core/device.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_training.h"
#include "models/gpt2/gpt2_registration.h"

namespace zeroshard {
namespace {

std::string TempRoot(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/" + name;
}

void ExpectLossesClose(const TrainedRun& a, const TrainedRun& b, double rel, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_NEAR(a.losses[i], b.losses[i], rel * std::fabs(b.losses[i])) << what << " step " << i;
  }
}

TEST(GpuCpuParityTest, F32LossesWithin1e4Relative) {
  ZS_SKIP_WITHOUT_GPU();
  TrainedRun gpu = Train(GpuTestConfig(Device::kCuda, 0, DTypeProto::F32), 20);
  TrainedRun cpu = Train(GpuTestConfig(Device::kCpu, 0, DTypeProto::F32), 20);
  ExpectLossesClose(gpu, cpu, 1e-4, "f32");
}

TEST(GpuCpuParityTest, Bf16LossesWithinThePrecisionTolerance) {
  ZS_SKIP_WITHOUT_GPU();
  TrainedRun gpu = Train(GpuTestConfig(Device::kCuda, 0, DTypeProto::BF16), 20);
  TrainedRun cpu = Train(GpuTestConfig(Device::kCpu, 0, DTypeProto::BF16), 20);
  // bf16 keeps 8 bits: GEMM summation orders differ between cuBLAS and
  // OpenBLAS, so the two runs agree to about bf16's resolution.
  ExpectLossesClose(gpu, cpu, 2e-2, "bf16");
}

// Saved on `from`, loaded into a fresh engine on `to`: the same bits.
void CheckpointMoves(Device from, Device to, const std::string& name) {
  const TrainConfig saving = GpuTestConfig(from, 1, DTypeProto::F32);
  TrainedRun run = Train(saving, 3);
  ASSERT_NE(run.engine, nullptr);
  const std::string root = TempRoot(name);
  ASSERT_TRUE(SaveCheckpoint(*run.engine, root, 3, Gpt2RunRecord(saving), {3 * saving.data().batch_size(), 0}).ok());
  const TrainConfig loading = GpuTestConfig(to, 1, DTypeProto::F32);
  TrainedRun loaded = Train(loading, 0);
  ASSERT_NE(loaded.engine, nullptr);
  absl::StatusOr<LoadedCheckpoint> ck = LoadCheckpoint(*loaded.engine, root);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_TRUE(BitwiseEqual(GatherWeights(*loaded.engine), GatherWeights(*run.engine))) << name;
  // The optimizer state came along: one more step on each device from the
  // same state stays within the f32 tolerance.
  TrainMore(run, saving, 1);
  TrainMore(loaded, loading, 1);
  ASSERT_EQ(loaded.losses.size(), 1u);
  EXPECT_NEAR(loaded.losses[0], run.losses.back(), 1e-4 * std::fabs(run.losses.back())) << name;
}

TEST(GpuCpuParityTest, GpuCheckpointResumesOnCpuBitwise) {
  ZS_SKIP_WITHOUT_GPU();
  CheckpointMoves(Device::kCuda, Device::kCpu, "gpu_to_cpu");
}

TEST(GpuCpuParityTest, CpuCheckpointResumesOnGpuBitwise) {
  ZS_SKIP_WITHOUT_GPU();
  CheckpointMoves(Device::kCpu, Device::kCuda, "cpu_to_gpu");
}

}  // namespace
}  // namespace zeroshard
