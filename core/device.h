// Where bytes live, and raw allocation on that device.
#ifndef ZEROSHARD_CORE_DEVICE_H_
#define ZEROSHARD_CORE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

enum class Device : uint8_t { kCpu, kCuda };

const char* DeviceName(Device device);  // "cpu", "cuda"

// Whether a usable CUDA device exists in this process. False when the build
// has no CUDA, when there is no GPU, or when the driver is missing or too old
// ("driver version is insufficient" counts as no GPU). `reason` (optional)
// receives a sentence saying why not, for test skip messages.
bool CudaAvailable(std::string* reason = nullptr);

// The CUDA devices this process sees. kUnavailable naming the CUDA error
// ("CUDA driver version is insufficient ...", no device) or the build.
absl::StatusOr<int> CudaDeviceCount();

// Makes `index` the process's current CUDA device and keeps freed memory in
// its default memory pool for reuse (release threshold: never), so that
// DeviceAlloc/DeviceFree inside a step do not return memory to the driver.
absl::Status UseCudaDevice(int index);

// The current CUDA device (cudaGetDevice); kUnavailable without CUDA.
absl::StatusOr<int> CurrentCudaDevice();

// Device `index`'s UUID as 32 hex digits (tells two ranks on one GPU apart
// from two GPUs, whatever CUDA_VISIBLE_DEVICES numbers them).
absl::StatusOr<std::string> CudaDeviceUuid(int index);

// The stream CUDA allocations are ordered on (cudaMallocAsync/cudaFreeAsync;
// nullptr = the legacy default stream). The engine sets its compute stream;
// a buffer freed there is reused by a later allocation without a device-wide
// synchronisation. Process-wide; set before allocating.
void SetCudaAllocationStream(void* cuda_stream);

// Allocates `bytes` on `device`: 64-byte aligned host memory, or
// stream-ordered device memory from the current device's pool. Contents are
// undefined. kUnavailable for kCuda without a GPU; kResourceExhausted when
// out of memory.
absl::StatusOr<void*> DeviceAlloc(Device device, size_t bytes);
void DeviceFree(Device device, void* ptr);

// Page-locked host memory (cudaHostAlloc) when a GPU is usable, so copies to
// and from the device can be asynchronous; otherwise 64-byte aligned host
// memory. Free with PinnedHostFree.
absl::StatusOr<void*> PinnedHostAlloc(size_t bytes);
void PinnedHostFree(void* ptr);

// Owns PinnedHostAlloc'd bytes (none when default-constructed); move-only.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static absl::StatusOr<PinnedHostBuffer> Allocate(size_t bytes);
  void* data() const { return ptr_.get(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_.get());
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }

 private:
  std::unique_ptr<void, void (*)(void*)> ptr_{nullptr, &PinnedHostFree};
  size_t bytes_ = 0;
};

// Copies between any two devices (host <-> device, device <-> device).
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// The same, stream-ordered on `cuda_stream` (a cudaStream_t) when a device
// is involved: returns once enqueued. For the copy to overlap, host memory
// must be pinned (PinnedHostAlloc) and stay untouched until the stream has
// passed the copy. Host to host is a plain memcpy.
absl::Status DeviceCopyAsync(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                             void* cuda_stream);
// Sets `bytes` bytes to `value` on `device`.
absl::Status DeviceMemset(void* dst, Device device, int value, size_t bytes);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_DEVICE_H_
