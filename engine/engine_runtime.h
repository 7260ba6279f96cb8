// What a rank runs an engine config on: its device, bound before anything
// else touches CUDA, and the process grid whose data communicators move
// that device's buffers (engine.comm.backend), next to MPI control
// communicators in host memory (docs/gpu.md).
#ifndef ZEROSHARD_ENGINE_ENGINE_RUNTIME_H_
#define ZEROSHARD_ENGINE_ENGINE_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "core/device.h"
#include "proto/engine_config.pb.h"

namespace zeroshard {

enum class DataBackend {
  kMpi,        // host buffers over MPI (CPU runs)
  kNccl,       // device buffers over NCCL (one GPU per rank)
  kStagedMpi,  // device buffers over MPI through pinned host staging
};

// "MPI", "NCCL", "MPI staged through pinned host memory".
const char* DataBackendName(DataBackend backend);

// The data backend for `requested` on `device`. `shared_gpu` is empty when
// every rank has a GPU of its own, else a phrase naming two ranks on one
// GPU ("world ranks 0 and 1 share GPU <uuid>"). kInvalidArgument for NCCL
// on CPU or NCCL with a shared GPU, naming the field.
absl::StatusOr<DataBackend> ChooseDataBackend(CommConfig::Backend requested, Device device,
                                              const std::string& shared_gpu);

struct EngineRuntime {
  Device device = Device::kCpu;
  int cuda_device = -1;  // the bound GPU's index (CUDA only)
  DataBackend backend = DataBackend::kMpi;
  std::unique_ptr<ProcessGrid> grid;
  // "cpu, MPI" or "cuda:0, NCCL" / "cuda:0, MPI staged through pinned host
  // memory (world ranks 0 and 1 share GPU ...)": the trainer prints it once.
  std::string description;
  // The CPU kernels' library, core type and threads
  // (kernels::CpuBlasSummary()), which the trainer prints once.
  std::string cpu_kernels;
  // Empty when every world rank runs the same OpenBLAS core type; else why
  // the cross-rank bitwise guarantees do not hold (docs/determinism.md), for
  // the trainer to print once.
  std::string cpu_kernels_warning;
};

// "" when every rank's core type is the same; else a warning naming the first
// rank whose core type differs from rank 0's. cores[r] is rank r's.
std::string MixedCpuKernelsWarning(const std::vector<std::string>& cores);

// Collective over MPI_COMM_WORLD (initialising MPI if needed). Sets the CPU
// kernel threads (engine.device.threads_per_rank, else
// kernels::DefaultCpuThreads()) and compares the ranks' OpenBLAS core
// types. For CUDA,
// binds this rank's GPU (engine.device.gpu_id, else the local rank modulo
// the visible devices); a rank that cannot makes every rank return the same
// error, e.g. "binding the CUDA device failed on world rank 0:
// engine.device.type CUDA: cudaGetDeviceCount: CUDA driver version is
// insufficient for CUDA runtime version" (relayed on the other ranks). Then
// compares the ranks' GPU UUIDs, picks the data backend and builds the grid
// of engine.parallel and engine.zero.shard_group_size.
absl::StatusOr<EngineRuntime> CreateEngineRuntime(const EngineConfig& config, const CommOptions& options);

}  // namespace zeroshard

#endif  // ZEROSHARD_ENGINE_ENGINE_RUNTIME_H_
