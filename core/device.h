// Where bytes live, and raw allocation on that device.
#ifndef ZEROSHARD_CORE_DEVICE_H_
#define ZEROSHARD_CORE_DEVICE_H_

#include <cstddef>
#include <cstdint>
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

// Allocates `bytes` on `device`: 64-byte aligned host memory or cudaMalloc.
// kUnavailable for kCuda without a GPU; kResourceExhausted when out of memory.
absl::StatusOr<void*> DeviceAlloc(Device device, size_t bytes);
void DeviceFree(Device device, void* ptr);

// Copies between any two devices (host <-> device, device <-> device).
absl::Status DeviceCopy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Sets `bytes` bytes to `value` on `device`.
absl::Status DeviceMemset(void* dst, Device device, int value, size_t bytes);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_DEVICE_H_
