// DeviceArray: a CUDA buffer holding a copy of host data, for the GPU
// kernels' tolerance tests (CPU reference vs GPU on the same inputs).
// Allocation and copy failures fail the test.
#ifndef ZEROSHARD_KERNELS_TESTING_DEVICE_ARRAY_H_
#define ZEROSHARD_KERNELS_TESTING_DEVICE_ARRAY_H_

#include <cstddef>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "gtest/gtest.h"
#include "kernels/testing/kernel_test_util.h"

namespace zeroshard::kernels::testing {

class DeviceArray {
 public:
  // `bytes` on the device, filled from `host` unless it is null.
  DeviceArray(const void* host, size_t bytes) : bytes_(bytes) {
    auto p = DeviceAlloc(Device::kCuda, bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    ptr_ = p.ok() ? *p : nullptr;
    if (ptr_ != nullptr && host != nullptr) {
      EXPECT_TRUE(DeviceCopy(ptr_, Device::kCuda, host, Device::kCpu, bytes).ok());
    }
  }
  explicit DeviceArray(const HostTensor& t) : DeviceArray(t.data(), t.size() * DTypeSize(t.dtype())) {}
  template <typename T>
  explicit DeviceArray(const std::vector<T>& v) : DeviceArray(v.data(), v.size() * sizeof(T)) {}
  ~DeviceArray() { DeviceFree(Device::kCuda, ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  // Into a host tensor of the same byte size.
  void CopyTo(HostTensor& t) const {
    ASSERT_TRUE(DeviceCopy(t.data(), Device::kCpu, ptr_, Device::kCuda, bytes_).ok());
  }
  // The elements as T, widened to double.
  template <typename T>
  std::vector<double> ToDoubles() const {
    std::vector<T> v(bytes_ / sizeof(T));
    EXPECT_TRUE(DeviceCopy(v.data(), Device::kCpu, ptr_, Device::kCuda, bytes_).ok());
    return std::vector<double>(v.begin(), v.end());
  }
  // The elements read as `dtype`, as doubles.
  std::vector<double> Fetch(DType dtype) const {
    HostTensor t(dtype, static_cast<int64_t>(bytes_ / DTypeSize(dtype)));
    EXPECT_TRUE(DeviceCopy(t.data(), Device::kCpu, ptr_, Device::kCuda, bytes_).ok());
    return t.Values();
  }
  // The raw bytes, for bitwise comparison.
  std::vector<unsigned char> Bytes() const {
    std::vector<unsigned char> b(bytes_);
    EXPECT_TRUE(DeviceCopy(b.data(), Device::kCpu, ptr_, Device::kCuda, bytes_).ok());
    return b;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
};

}  // namespace zeroshard::kernels::testing

#endif  // ZEROSHARD_KERNELS_TESTING_DEVICE_ARRAY_H_
