#include "kernels/cuda/cuda_resources.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include "kernels/cuda/cuda_util.cuh"

namespace zeroshard::kernels::cuda {

absl::StatusOr<std::unique_ptr<CudaResources>> CudaResources::Create() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("CudaResources: no usable GPU (",
                                               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices", ")"));
  }
  std::unique_ptr<CudaResources> r(new CudaResources());
  cudaStream_t stream = nullptr;
  // A blocking stream: it orders with the legacy default stream, which
  // core/device.h's DeviceCopy/DeviceMemset use, so copies and kernels of
  // one thread never race.
  if (absl::Status s = CudaStatus("cudaStreamCreate", cudaStreamCreate(&stream)); !s.ok()) return s;
  r->stream_ = stream;
  cublasHandle_t handle = nullptr;
  cublasStatus_t cs = cublasCreate(&handle);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasCreate: ", cublasGetStatusString(cs)));
  }
  r->cublas_ = handle;
  cublasLtHandle_t lt = nullptr;
  cs = cublasLtCreate(&lt);
  if (cs != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasLtCreate: ", cublasGetStatusString(cs)));
  }
  r->cublaslt_ = lt;
  if (absl::Status s = CudaStatus("cudaMalloc (kernel workspace)", cudaMalloc(&r->workspace_, kMinCudaWorkspaceBytes));
      !s.ok()) {
    return s;
  }
  return r;
}

CudaResources::~CudaResources() {
  if (cublas_ != nullptr) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
  if (cublaslt_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

KernelContext CudaResources::context() const {
  KernelContext ctx;
  ctx.device = Device::kCuda;
  ctx.cuda_stream = stream_;
  ctx.cublas_handle = cublas_;
  ctx.cublaslt_handle = cublaslt_;
  ctx.cuda_workspace = workspace_;
  ctx.cuda_workspace_bytes = kMinCudaWorkspaceBytes;
  return ctx;
}

absl::Status CudaResources::Synchronize() const {
  return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
}

}  // namespace zeroshard::kernels::cuda
