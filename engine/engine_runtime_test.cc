#include "engine/engine_runtime.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ChooseDataBackendTest, CpuRunsOverMpi) {
  EXPECT_EQ(*ChooseDataBackend(CommConfig::AUTO, Device::kCpu, ""), DataBackend::kMpi);
  EXPECT_EQ(*ChooseDataBackend(CommConfig::MPI, Device::kCpu, ""), DataBackend::kMpi);
  absl::StatusOr<DataBackend> nccl = ChooseDataBackend(CommConfig::NCCL, Device::kCpu, "");
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().message(), "engine.comm.backend: NCCL needs engine.device.type CUDA; got CPU");
}

TEST(ChooseDataBackendTest, AutoPicksNcclUnlessRanksShareAGpu) {
  EXPECT_EQ(*ChooseDataBackend(CommConfig::AUTO, Device::kCuda, ""), DataBackend::kNccl);
  EXPECT_EQ(*ChooseDataBackend(CommConfig::AUTO, Device::kCuda, "world ranks 0 and 1 share GPU ab"),
            DataBackend::kStagedMpi);
}

TEST(ChooseDataBackendTest, MpiWithCudaStages) {
  EXPECT_EQ(*ChooseDataBackend(CommConfig::MPI, Device::kCuda, ""), DataBackend::kStagedMpi);
}

TEST(ChooseDataBackendTest, NcclRefusesASharedGpu) {
  EXPECT_EQ(*ChooseDataBackend(CommConfig::NCCL, Device::kCuda, ""), DataBackend::kNccl);
  absl::StatusOr<DataBackend> shared = ChooseDataBackend(CommConfig::NCCL, Device::kCuda,
                                                         "world ranks 0 and 1 share GPU ab");
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shared.status().message(),
            "engine.comm.backend: NCCL but world ranks 0 and 1 share GPU ab; NCCL needs a GPU per rank: use AUTO "
            "or MPI (staged through host memory), or give each rank its own GPU");
}

TEST(MixedCpuKernelsWarningTest, SilentWhenEveryRankRunsTheSameKernels) {
  EXPECT_EQ(MixedCpuKernelsWarning({"Haswell"}), "");
  EXPECT_EQ(MixedCpuKernelsWarning({"Zen", "Zen", "Zen"}), "");
}

TEST(MixedCpuKernelsWarningTest, NamesTheFirstRankThatDiffers) {
  EXPECT_EQ(MixedCpuKernelsWarning({"Haswell", "Haswell", "SkylakeX", "Zen"}),
            "world ranks 0 and 2 run different OpenBLAS kernels (Haswell and SkylakeX): each rank stays bitwise "
            "repeatable, but tensor-parallel replicas may drift apart bitwise and a run no longer repeats bitwise "
            "on other machines (docs/determinism.md); set OPENBLAS_CORETYPE alike on every host to restore it");
}

TEST(DataBackendNameTest, Names) {
  EXPECT_STREQ(DataBackendName(DataBackend::kMpi), "MPI");
  EXPECT_STREQ(DataBackendName(DataBackend::kNccl), "NCCL");
  EXPECT_STREQ(DataBackendName(DataBackend::kStagedMpi), "MPI staged through pinned host memory");
}

}  // namespace
}  // namespace zeroshard
