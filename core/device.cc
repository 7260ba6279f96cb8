#include "core/device.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/host_memset_threads.h"
#include "core/status_macros.h"
#include "core/step_profile.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace zeroshard {

const char* DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

bool CudaAvailable(std::string* reason) {
#ifdef ZEROSHARD_HAS_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = absl::StrCat("no usable GPU: ", cudaGetErrorString(err));
    cudaGetLastError();  // Clear the sticky error for later calls.
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "no GPU: cudaGetDeviceCount returned 0";
    return false;
  }
  return true;
#else
  if (reason) *reason = "built without CUDA (--//bazel:cuda=false or no nvcc)";
  return false;
#endif
}

namespace {

#ifdef ZEROSHARD_HAS_CUDA
std::atomic<void*> allocation_stream{nullptr};

cudaStream_t AllocationStream() { return static_cast<cudaStream_t>(allocation_stream.load()); }

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear a sticky error for later calls
  return absl::UnavailableError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}
#endif

void* AlignedHostAlloc(size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
#ifdef ZEROSHARD_HAS_CUDA
  int count = 0;
  RETURN_IF_ERROR(CudaError(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (count == 0) return absl::UnavailableError("cudaGetDeviceCount: no CUDA device is visible");
  return count;
#else
  return absl::UnavailableError("built without CUDA (--//bazel:cuda=false or no nvcc)");
#endif
}

absl::Status UseCudaDevice(int index) {
#ifdef ZEROSHARD_HAS_CUDA
  RETURN_IF_ERROR(CudaError(cudaSetDevice(index), absl::StrCat("cudaSetDevice(", index, ")")));
  cudaMemPool_t pool;
  RETURN_IF_ERROR(CudaError(cudaDeviceGetDefaultMemPool(&pool, index), "cudaDeviceGetDefaultMemPool"));
  uint64_t keep_everything = UINT64_MAX;
  return CudaError(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything),
                   "cudaMemPoolSetAttribute(release threshold)");
#else
  return absl::UnavailableError(absl::StrCat("cannot use CUDA device ", index, ": built without CUDA"));
#endif
}

absl::StatusOr<int> CurrentCudaDevice() {
#ifdef ZEROSHARD_HAS_CUDA
  int index = 0;
  RETURN_IF_ERROR(CudaError(cudaGetDevice(&index), "cudaGetDevice"));
  return index;
#else
  return absl::UnavailableError("built without CUDA");
#endif
}

absl::StatusOr<std::string> CudaDeviceUuid(int index) {
#ifdef ZEROSHARD_HAS_CUDA
  cudaDeviceProp prop;
  RETURN_IF_ERROR(CudaError(cudaGetDeviceProperties(&prop, index), absl::StrCat("cudaGetDeviceProperties(", index, ")")));
  std::string hex;
  for (char c : prop.uuid.bytes) absl::StrAppend(&hex, absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
  return hex;
#else
  return absl::UnavailableError(absl::StrCat("no UUID for CUDA device ", index, ": built without CUDA"));
#endif
}

void SetCudaAllocationStream(void* cuda_stream) {
#ifdef ZEROSHARD_HAS_CUDA
  allocation_stream.store(cuda_stream);
#else
  (void)cuda_stream;
#endif
}

absl::StatusOr<void*> DeviceAlloc(Device device, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (device == Device::kCpu) {
    void* p = AlignedHostAlloc(bytes);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
    }
    return p;
  }
#ifdef ZEROSHARD_HAS_CUDA
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes, AllocationStream());
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cudaMallocAsync of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return p;
#else
  return absl::UnavailableError("cuda allocation requested but zeroshard was built without CUDA");
#endif
}

void DeviceFree(Device device, void* ptr) {
  if (ptr == nullptr) return;
  if (device == Device::kCpu) {
    std::free(ptr);
    return;
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaFreeAsync(ptr, AllocationStream());
#endif
}

absl::StatusOr<void*> PinnedHostAlloc(size_t bytes) {
  if (bytes == 0) return nullptr;
#ifdef ZEROSHARD_HAS_CUDA
  if (CudaAvailable()) {
    void* p = nullptr;
    cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (err == cudaSuccess) return p;
    cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat("cudaHostAlloc of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
#endif
  void* p = AlignedHostAlloc(bytes);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
  return p;
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes) {
  PinnedHostBuffer b;
  ASSIGN_OR_RETURN(void* p, PinnedHostAlloc(bytes));
  b.ptr_.reset(p);
  b.bytes_ = bytes;
  return b;
}

void PinnedHostFree(void* ptr) {
  if (ptr == nullptr) return;
#ifdef ZEROSHARD_HAS_CUDA
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) == cudaSuccess && attr.type == cudaMemoryTypeHost) {
    cudaFreeHost(ptr);
    return;
  }
  cudaGetLastError();
#endif
  std::free(ptr);
}

absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemcpy of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("cuda copy requested but zeroshard was built without CUDA");
#endif
}

absl::Status DeviceCopyAsync(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                             void* cuda_stream) {
  if (bytes == 0) return absl::OkStatus();
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(cuda_stream));
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(
        absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  (void)cuda_stream;
  return absl::UnavailableError("cuda copy requested but zeroshard was built without CUDA");
#endif
}

namespace {

std::atomic<int> g_host_memset_threads{1};

// Below this many bytes per thread a thread's start costs more than it saves.
constexpr size_t kMemsetBytesPerThread = size_t{8} << 20;

void HostMemset(void* dst, int value, size_t bytes) {
  const size_t useful = bytes / kMemsetBytesPerThread;
  const int threads = static_cast<int>(std::min<size_t>(g_host_memset_threads.load(), std::max<size_t>(1, useful)));
  char* base = static_cast<char*>(dst);
  auto part = [&](int i) {
    const size_t begin = bytes * i / threads, end = bytes * (i + 1) / threads;
    std::memset(base + begin, value, end - begin);
  };
  std::vector<std::thread> helpers;
  int started = 1;
  for (; started < threads; ++started) {
    try {
      helpers.emplace_back(part, started);
    } catch (const std::system_error&) {
      break;  // no thread to be had: the rest on this one
    }
  }
  for (int i = started; i < threads; ++i) part(i);
  part(0);
  for (std::thread& t : helpers) t.join();
}

}  // namespace

void SetHostMemsetThreads(int n) { g_host_memset_threads.store(n < 1 ? 1 : n); }

absl::Status DeviceMemset(void* dst, Device device, int value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (device == Device::kCpu) {
    const step_profile::Scope profile(step_profile::Category::kAllocation);
    HostMemset(dst, value, bytes);
    return absl::OkStatus();
  }
#ifdef ZEROSHARD_HAS_CUDA
  cudaError_t err = cudaMemset(dst, value, bytes);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemset of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  return absl::UnavailableError("cuda memset requested but zeroshard was built without CUDA");
#endif
}

}  // namespace zeroshard
