#include "core/device_selection.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/status_macros.h"

namespace zeroshard {

int LocalRankFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* value = std::getenv(name);
    int rank = -1;
    if (value != nullptr && absl::SimpleAtoi(value, &rank) && rank >= 0) return rank;
  }
  return 0;
}

absl::StatusOr<int> ChooseCudaDevice(int local_rank, int device_count, int gpu_id) {
  if (device_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("no CUDA device to choose from (", device_count, " visible)"));
  }
  if (gpu_id >= device_count) {
    return absl::InvalidArgumentError(absl::StrCat("engine.device.gpu_id: ", gpu_id, " but only ", device_count,
                                                   " CUDA device(s) are visible; expected 0..", device_count - 1));
  }
  if (gpu_id >= 0) return gpu_id;
  return (local_rank < 0 ? 0 : local_rank) % device_count;
}

absl::StatusOr<int> BindCudaDevice(int gpu_id) {
  ASSIGN_OR_RETURN(int count, CudaDeviceCount());
  ASSIGN_OR_RETURN(int device, ChooseCudaDevice(LocalRankFromEnvironment(), count, gpu_id));
  RETURN_IF_ERROR(UseCudaDevice(device));
  return device;
}

}  // namespace zeroshard
