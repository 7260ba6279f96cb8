#include "engine/engine_runtime.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/staged_communicator.h"
#include "comm/status_agreement.h"
#include "core/device_selection.h"
#include "core/status_macros.h"
#include "kernels/context.h"

namespace zeroshard {
namespace {

constexpr int kUuidChars = 32;
constexpr int kCoreNameChars = 32;

// Every world rank's OpenBLAS core type, in rank order.
absl::StatusOr<std::vector<std::string>> GatherCpuCores(Communicator& world, const std::string& core) {
  std::string padded = core;
  padded.resize(kCoreNameChars, '\0');
  std::vector<char> all(static_cast<size_t>(kCoreNameChars) * world.size());
  RETURN_IF_ERROR(world.AllGather(padded.data(), all.data(), kCoreNameChars, DType::kI8)->Wait());
  std::vector<std::string> cores;
  for (int r = 0; r < world.size(); ++r) cores.emplace_back(all.data() + r * kCoreNameChars);  // NUL-terminated
  return cores;
}

// Every rank's GPU UUID over `world`; "" when every rank has its own GPU,
// else a phrase naming the first two ranks that share one.
absl::StatusOr<std::string> FindSharedGpu(Communicator& world, int cuda_device) {
  ASSIGN_OR_RETURN(std::string uuid, CudaDeviceUuid(cuda_device));
  uuid.resize(kUuidChars, '0');
  std::vector<char> all(static_cast<size_t>(kUuidChars) * world.size());
  RETURN_IF_ERROR(world.AllGather(uuid.data(), all.data(), kUuidChars, DType::kI8)->Wait());
  for (int a = 0; a < world.size(); ++a) {
    for (int b = a + 1; b < world.size(); ++b) {
      if (std::equal(all.begin() + a * kUuidChars, all.begin() + (a + 1) * kUuidChars, all.begin() + b * kUuidChars)) {
        return absl::StrCat(world.name(), " ranks ", a, " and ", b, " share GPU ",
                            std::string(all.data() + a * kUuidChars, kUuidChars));
      }
    }
  }
  return std::string();
}

}  // namespace

std::string MixedCpuKernelsWarning(const std::vector<std::string>& cores) {
  for (size_t r = 1; r < cores.size(); ++r) {
    if (cores[r] != cores[0]) {
      return absl::StrCat("world ranks 0 and ", r, " run different OpenBLAS kernels (", cores[0], " and ", cores[r],
                          "): each rank stays bitwise repeatable, but tensor-parallel replicas may drift apart "
                          "bitwise and a run no longer repeats bitwise on other machines (docs/determinism.md); "
                          "set OPENBLAS_CORETYPE alike on every host to restore it");
    }
  }
  return std::string();
}

const char* DataBackendName(DataBackend backend) {
  switch (backend) {
    case DataBackend::kMpi:
      return "MPI";
    case DataBackend::kNccl:
      return "NCCL";
    case DataBackend::kStagedMpi:
      return "MPI staged through pinned host memory";
  }
  return "?";
}

absl::StatusOr<DataBackend> ChooseDataBackend(CommConfig::Backend requested, Device device,
                                              const std::string& shared_gpu) {
  if (device == Device::kCpu) {
    if (requested == CommConfig::NCCL) {
      return absl::InvalidArgumentError("engine.comm.backend: NCCL needs engine.device.type CUDA; got CPU");
    }
    return DataBackend::kMpi;
  }
  switch (requested) {
    case CommConfig::MPI:
      return DataBackend::kStagedMpi;
    case CommConfig::NCCL:
      if (!shared_gpu.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("engine.comm.backend: NCCL but ", shared_gpu,
                                                       "; NCCL needs a GPU per rank: use AUTO or MPI (staged "
                                                       "through host memory), or give each rank its own GPU"));
      }
      return DataBackend::kNccl;
    case CommConfig::AUTO:
    default:
      return shared_gpu.empty() ? DataBackend::kNccl : DataBackend::kStagedMpi;
  }
}

absl::StatusOr<EngineRuntime> CreateEngineRuntime(const EngineConfig& config, const CommOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> world, CreateMpiWorld(options));
  EngineRuntime rt;
  kernels::SetCpuThreads(kernels::CpuThreadsOrDefault(config.device().threads_per_rank()));
  RETURN_IF_ERROR(kernels::ConfigureCpuVectorIsa());
  rt.cpu_kernels = kernels::CpuBlasSummary();
  ASSIGN_OR_RETURN(const std::vector<std::string> cores, GatherCpuCores(*world, kernels::DescribeCpuBlas().core));
  rt.cpu_kernels_warning = MixedCpuKernelsWarning(cores);
  rt.device = config.device().type() == DeviceConfig::CUDA ? Device::kCuda : Device::kCpu;
  std::string shared_gpu;
  if (rt.device == Device::kCuda) {
    absl::StatusOr<int> bound = BindCudaDevice(config.device().has_gpu_id() ? config.device().gpu_id() : -1);
    absl::Status local = bound.status();
    if (!local.ok()) local = absl::Status(local.code(), absl::StrCat("engine.device.type CUDA: ", local.message()));
    RETURN_IF_ERROR(AgreeAcrossRanksSharingError(*world, local, "binding the CUDA device"));
    rt.cuda_device = *bound;
    absl::StatusOr<std::string> shared = FindSharedGpu(*world, rt.cuda_device);
    RETURN_IF_ERROR(AgreeAcrossRanksSharingError(*world, shared.status(), "reading the GPU's UUID"));
    shared_gpu = *shared;
  }
  ASSIGN_OR_RETURN(rt.backend, ChooseDataBackend(config.comm().backend(), rt.device, shared_gpu));
  const ParallelConfig& par = config.parallel();
  const GridShape shape{par.dp(), par.tp(), par.pp(), config.zero().shard_group_size()};
  std::unique_ptr<Communicator> data;
  switch (rt.backend) {
    case DataBackend::kMpi:
      break;
    case DataBackend::kNccl: {
      absl::StatusOr<std::unique_ptr<Communicator>> nccl = CreateNcclWorld(options, rt.cuda_device);
      RETURN_IF_ERROR(AgreeAcrossRanksSharingError(*world, nccl.status(), "creating the NCCL world"));
      data = std::move(*nccl);
      break;
    }
    case DataBackend::kStagedMpi: {
      ASSIGN_OR_RETURN(std::unique_ptr<Communicator> host, world->Split(0, world->rank(), "world"));
      ASSIGN_OR_RETURN(data, CreateStagedCommunicator(std::move(host), Device::kCuda));
      break;
    }
  }
  rt.description = rt.device == Device::kCpu ? std::string("cpu, MPI")
                                             : absl::StrCat("cuda:", rt.cuda_device, ", ", DataBackendName(rt.backend),
                                                            shared_gpu.empty() ? "" : absl::StrCat(" (", shared_gpu, ")"));
  absl::StatusOr<ProcessGrid> grid = data == nullptr ? ProcessGrid::Create(std::move(world), shape)
                                                     : ProcessGrid::Create(std::move(world), std::move(data), shape);
  if (!grid.ok()) return grid.status();
  rt.grid = std::make_unique<ProcessGrid>(std::move(*grid));
  return rt;
}

}  // namespace zeroshard
