// Owned device or host bytes, accounted in a MemoryTracker category, and
// TensorView, a non-owning typed view.
#ifndef ZEROSHARD_CORE_BUFFER_H_
#define ZEROSHARD_CORE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/memory_tracker.h"

namespace zeroshard {

// Move-only owner of `numel * DTypeSize(dtype)` bytes on one device. The bytes
// are counted in `tracker` under `category` from Allocate until destruction
// or Reset. The tracker must outlive the buffer.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Contents undefined: for buffers whose every element is written before
  // it is read (collective outputs, staging, copies).
  static absl::StatusOr<Buffer> Allocate(MemoryTracker* tracker, MemoryCategory category, Device device,
                                         DType dtype, int64_t numel);
  // Contents zero.
  static absl::StatusOr<Buffer> AllocateZeroed(MemoryTracker* tracker, MemoryCategory category, Device device,
                                               DType dtype, int64_t numel);

  // Frees the bytes now (the tracker sees the release immediately).
  void Reset();

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  MemoryCategory category() const { return category_; }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * static_cast<int64_t>(DTypeSize(dtype_)); }
  bool empty() const { return numel_ == 0; }

 private:
  void* data_ = nullptr;
  MemoryTracker* tracker_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kWorkspace;
  Device device_ = Device::kCpu;
  DType dtype_ = DType::kF32;
  int64_t numel_ = 0;
};

// Pointer + dtype + shape + device. No ownership, no autograd; the viewed
// memory must outlive the view. Shapes are row-major.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  Device device = Device::kCpu;

  int64_t numel() const;
  int64_t bytes() const { return numel() * static_cast<int64_t>(DTypeSize(dtype)); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // "f32[4, 16]"
  std::string DebugString() const;
};

// A view of a whole buffer with the given shape; the shape's product must
// equal buf.numel(). TensorView has no const flavour: a view of a const
// buffer is for reading only, by contract.
TensorView ViewOf(Buffer& buf, std::vector<int64_t> shape);
TensorView ViewOf(const Buffer& buf, std::vector<int64_t> shape);

}  // namespace zeroshard

#endif  // ZEROSHARD_CORE_BUFFER_H_
