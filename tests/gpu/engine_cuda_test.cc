// The engine on CUDA under mpirun on one GPU (tools/gpu-check, part
// "engine"): at np 1 the data communicators are NCCL, at np 2 the ranks
// share the GPU and AUTO picks MPI staged through pinned host memory; ZeRO
// stages 0-3 train GPT-2 tiny to bitwise the same weights at a fixed dp, and
// to the CPU run's within the f32 tolerance; at np 2 a two-stage pipeline
// trains like its CPU twin. Skips without a usable GPU.
#include <cmath>
#include <string>

#include "core/device.h"
#include "engine/engine_runtime.h"
#include "engine/testing/mpi_grids.h"
#include "engine/testing/weights.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_training.h"

namespace zeroshard {
namespace {

TEST(EngineCudaTest, PicksTheDataBackendForTheRanksGpus) {
  ZS_SKIP_WITHOUT_GPU();
  const EngineRuntime& rt = RuntimeFor(Device::kCuda);
  EXPECT_EQ(rt.device, Device::kCuda);
  EXPECT_GE(rt.cuda_device, 0);
  EXPECT_EQ(rt.grid->dp().device(), Device::kCuda);
  EXPECT_EQ(rt.grid->control(GridAxis::kDp).device(), Device::kCpu) << "control traffic stays in host memory";
  absl::StatusOr<int> count = CudaDeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  if (MpiWorldSize() > *count) {
    EXPECT_EQ(rt.backend, DataBackend::kStagedMpi) << rt.description;
    EXPECT_NE(rt.description.find("share GPU"), std::string::npos) << rt.description;
  } else {
    EXPECT_EQ(rt.backend, DataBackend::kNccl) << rt.description;
  }
}

TEST(EngineCudaTest, StagesZeroToThreeGiveBitwiseTheSameWeights) {
  ZS_SKIP_WITHOUT_GPU();
  Weights first;
  for (int stage = 0; stage <= 3; ++stage) {
    TrainedRun run = Train(GpuTestConfig(Device::kCuda, stage, DTypeProto::F32), 5);
    ASSERT_NE(run.engine, nullptr);
    Weights w = GatherWeights(*run.engine);
    if (stage == 0) {
      first = w;
    } else {
      EXPECT_TRUE(BitwiseEqual(w, first)) << "stage " << stage << " vs 0: relative L2 " << RelativeL2(w, first);
    }
  }
}

TEST(EngineCudaTest, TrainsLikeTheCpuInF32) {
  ZS_SKIP_WITHOUT_GPU();
  for (int stage : {0, 3}) {
    TrainedRun gpu = Train(GpuTestConfig(Device::kCuda, stage, DTypeProto::F32), 5);
    TrainedRun cpu = Train(GpuTestConfig(Device::kCpu, stage, DTypeProto::F32), 5);
    ASSERT_NE(gpu.engine, nullptr);
    ASSERT_NE(cpu.engine, nullptr);
    ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
    for (size_t i = 0; i < gpu.losses.size(); ++i) {
      EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-4 * std::fabs(cpu.losses[i])) << "stage " << stage << " step " << i;
    }
    EXPECT_LT(RelativeL2(GatherWeights(*gpu.engine), GatherWeights(*cpu.engine)), 1e-4) << "stage " << stage;
  }
}

TEST(EngineCudaTest, APipelineTrainsLikeTheCpu) {
  ZS_SKIP_WITHOUT_GPU();
  if (MpiWorldSize() != 2) GTEST_SKIP() << "a two-stage pipeline runs at np 2";
  TrainedRun gpu = Train(GpuTestConfig(Device::kCuda, 1, DTypeProto::F32, 2), 5);
  TrainedRun cpu = Train(GpuTestConfig(Device::kCpu, 1, DTypeProto::F32, 2), 5);
  ASSERT_NE(gpu.engine, nullptr);
  ASSERT_NE(cpu.engine, nullptr);
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < gpu.losses.size(); ++i) {
    EXPECT_NEAR(gpu.losses[i], cpu.losses[i], 1e-4 * std::fabs(cpu.losses[i])) << "step " << i;
  }
  EXPECT_LT(RelativeL2(GatherWeights(*gpu.engine), GatherWeights(*cpu.engine)), 1e-4);
}

}  // namespace
}  // namespace zeroshard
