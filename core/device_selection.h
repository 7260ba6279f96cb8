// Which CUDA device a rank uses: one GPU per rank on each host, the rank's
// index among its host's processes picking it (modulo the visible devices),
// unless the config names one.
#ifndef ZEROSHARD_CORE_DEVICE_SELECTION_H_
#define ZEROSHARD_CORE_DEVICE_SELECTION_H_

#include "absl/status/statusor.h"

namespace zeroshard {

// This process's rank on its host as the launcher tells it:
// OMPI_COMM_WORLD_LOCAL_RANK (mpirun), SLURM_LOCALID (srun), MPI_LOCALRANKID
// (MPICH/Hydra), the first that holds a non-negative integer; else 0.
int LocalRankFromEnvironment();

// `gpu_id` >= 0 picks that device; otherwise local_rank mod device_count.
// kInvalidArgument when device_count < 1 or gpu_id >= device_count (naming
// both).
absl::StatusOr<int> ChooseCudaDevice(int local_rank, int device_count, int gpu_id);

// Chooses this rank's device (ChooseCudaDevice over LocalRankFromEnvironment
// and CudaDeviceCount) and makes it current (UseCudaDevice). Returns its
// index; kUnavailable naming the CUDA error when no GPU is usable.
absl::StatusOr<int> BindCudaDevice(int gpu_id);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_DEVICE_SELECTION_H_
