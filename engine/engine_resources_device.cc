// The engine's device: the kernels' context (on CUDA a stream, cuBLAS handle
// and workspace), batches copied to the device, and the few host values
// (loss and norm sums, GatherParam's result) moved over data communicators
// that take device buffers (docs/gpu.md).
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "engine/engine_resources.h"

#ifdef ZEROSHARD_HAS_CUDA
#include "comm/nccl_communicator.h"
#include "kernels/cuda/cuda_resources.h"
#endif

namespace zeroshard {

absl::Status EngineResources::InitDevice() {
  compute.kernels = kernels::KernelContext::Cpu(options.threads_per_rank);
  compute.compute_dtype = options.compute_dtype;
  compute.tracker = &tracker;
  for (Communicator* c : DataCommunicators()) {
    if (c != nullptr && c->device() != options.device) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine.device.type is ", DeviceName(options.device), " but the data communicator '", c->name(),
                       "' moves ", DeviceName(c->device()),
                       " buffers; build the process grid with CreateEngineRuntime "
                       "(engine/engine_runtime.h), which picks the data backend for the device"));
    }
  }
  if (options.device == Device::kCpu) return absl::OkStatus();
#ifdef ZEROSHARD_HAS_CUDA
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::cuda::CudaResources> resources, kernels::cuda::CudaResources::Create());
  compute.kernels = resources->context();
  SetCudaAllocationStream(compute.kernels.cuda_stream);
  // NCCL collectives start after what the compute stream holds at issue
  // time; a staged communicator copies on the legacy stream, which the
  // (blocking) compute stream orders with.
  for (Communicator* c : DataCommunicators()) {
    if (c != nullptr) SetNcclComputeStream(*c, compute.kernels.cuda_stream).IgnoreError();
  }
  cuda_resources = std::shared_ptr<void>(resources.release(), [](void* p) {
    auto* r = static_cast<kernels::cuda::CudaResources*>(p);
    r->Synchronize().IgnoreError();
    SetCudaAllocationStream(nullptr);
    delete r;
  });
  return absl::OkStatus();
#else
  return absl::UnavailableError("engine.device.type CUDA but zeroshard was built without CUDA");
#endif
}

void EngineResources::DetachDevice() {
#ifdef ZEROSHARD_HAS_CUDA
  if (cuda_resources == nullptr) return;
  for (Communicator* c : DataCommunicators()) {
    if (c != nullptr) SetNcclComputeStream(*c, nullptr).IgnoreError();
  }
#endif
}

absl::Status EngineResources::StageBatches(absl::Span<const Batch> batches, std::vector<Buffer>* storage,
                                           std::vector<Batch>* copies) {
  copies->clear();
  if (device() == Device::kCpu) return absl::OkStatus();
  // Through pinned staging, so the copies are asynchronous on the compute
  // stream. The previous step's copies are done: its read-back came after.
  size_t total = 0;
  for (const Batch& b : batches) {
    for (const NamedTensor& t : b.tensors()) total += static_cast<size_t>(t.view.bytes());
  }
  if (total > batch_staging.bytes()) {
    batch_staging = PinnedHostBuffer();  // the old block goes before the new one comes
    ASSIGN_OR_RETURN(batch_staging, PinnedHostBuffer::Allocate(total));
  }
  char* staged = batch_staging.as<char>();
  for (const Batch& b : batches) {
    Batch copy;
    for (const NamedTensor& t : b.tensors()) {
      ASSIGN_OR_RETURN(Buffer buf, Buffer::Allocate(&tracker, MemoryCategory::kActivations, options.device,
                                                    t.view.dtype, t.view.numel()));
      const size_t bytes = static_cast<size_t>(t.view.bytes());
      if (bytes > 0) std::memcpy(staged, t.view.data, bytes);
      RETURN_IF_ERROR(
          DeviceCopyAsync(buf.data(), options.device, staged, Device::kCpu, bytes, compute.kernels.cuda_stream));
      staged += bytes;
      TensorView v = t.view;
      v.data = buf.data();
      v.device = options.device;
      copy.Add(t.name, std::move(v));
      storage->push_back(std::move(buf));
    }
    copies->push_back(std::move(copy));
  }
  return absl::OkStatus();
}

absl::Status EngineResources::HostCollective(Communicator& comm, const float* in, int64_t in_count, float* out,
                                             int64_t out_count,
                                             const std::function<std::unique_ptr<Work>(const void*, void*)>& issue,
                                             const std::function<absl::Status(Work&)>& wait) {
  const auto wait_for = [&](std::unique_ptr<Work> w) { return wait ? wait(*w) : w->Wait(); };
  if (comm.device() == Device::kCpu) return wait_for(issue(in, out));
  const bool in_place = static_cast<const void*>(in) == static_cast<const void*>(out);
  ASSIGN_OR_RETURN(Buffer dev_out,
                   Buffer::Allocate(&tracker, MemoryCategory::kCommBuffers, comm.device(), DType::kF32, out_count));
  Buffer dev_in;
  if (!in_place) {
    ASSIGN_OR_RETURN(dev_in,
                     Buffer::Allocate(&tracker, MemoryCategory::kCommBuffers, comm.device(), DType::kF32, in_count));
  }
  Buffer& staged_in = in_place ? dev_out : dev_in;
  RETURN_IF_ERROR(DeviceCopy(staged_in.data(), comm.device(), in, Device::kCpu, in_count * sizeof(float)));
  RETURN_IF_ERROR(wait_for(issue(staged_in.data(), dev_out.data())));
  return DeviceCopy(out, Device::kCpu, dev_out.data(), comm.device(), out_count * sizeof(float));
}

}  // namespace zeroshard
