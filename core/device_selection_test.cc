#include "core/device_selection.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(ChooseCudaDeviceTest, LocalRankModuloVisibleDevices) {
  EXPECT_EQ(*ChooseCudaDevice(0, 8, -1), 0);
  EXPECT_EQ(*ChooseCudaDevice(5, 8, -1), 5);
  EXPECT_EQ(*ChooseCudaDevice(9, 8, -1), 1);
  EXPECT_EQ(*ChooseCudaDevice(3, 1, -1), 0);  // ranks sharing the one GPU
}

TEST(ChooseCudaDeviceTest, GpuIdOverrides) {
  EXPECT_EQ(*ChooseCudaDevice(5, 8, 2), 2);
  absl::StatusOr<int> bad = ChooseCudaDevice(0, 2, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "engine.device.gpu_id: 2 but only 2 CUDA device(s) are visible; expected 0..1");
}

TEST(ChooseCudaDeviceTest, NoDevice) {
  absl::StatusOr<int> none = ChooseCudaDevice(0, 0, -1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "no CUDA device to choose from (0 visible)");
}

TEST(LocalRankFromEnvironmentTest, LaunchersInOrder) {
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
  unsetenv("MPI_LOCALRANKID");
  EXPECT_EQ(LocalRankFromEnvironment(), 0);
  setenv("MPI_LOCALRANKID", "4", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 4);
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  EXPECT_EQ(LocalRankFromEnvironment(), 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);  // not a rank: the next one counts
  EXPECT_EQ(LocalRankFromEnvironment(), 3);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("SLURM_LOCALID");
  unsetenv("MPI_LOCALRANKID");
}

}  // namespace
}  // namespace zeroshard
