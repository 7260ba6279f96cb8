#include "core/buffer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/step_profile.h"

namespace zeroshard {

Buffer::~Buffer() { Reset(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this == &other) return *this;
  Reset();
  data_ = std::exchange(other.data_, nullptr);
  tracker_ = std::exchange(other.tracker_, nullptr);
  category_ = other.category_;
  device_ = other.device_;
  dtype_ = other.dtype_;
  numel_ = std::exchange(other.numel_, 0);
  return *this;
}

absl::StatusOr<Buffer> Buffer::Allocate(MemoryTracker* tracker, MemoryCategory category, Device device,
                                        DType dtype, int64_t numel) {
  if (numel < 0) return absl::InvalidArgumentError(absl::StrCat("negative buffer size ", numel));
  const step_profile::Scope profile(step_profile::Category::kAllocation);
  Buffer buf;
  buf.category_ = category;
  buf.device_ = device;
  buf.dtype_ = dtype;
  const size_t bytes = static_cast<size_t>(numel) * DTypeSize(dtype);
  if (tracker != nullptr) RETURN_IF_ERROR(tracker->Reserve(category, static_cast<int64_t>(bytes)));
  // From here the tracker counts the bytes; Reset (on any early return)
  // gives them back.
  buf.tracker_ = tracker;
  buf.numel_ = numel;
  absl::StatusOr<void*> data = DeviceAlloc(device, bytes);
  if (!data.ok()) {
    buf.data_ = nullptr;
    return data.status();
  }
  buf.data_ = *data;
  return buf;
}

absl::StatusOr<Buffer> Buffer::AllocateZeroed(MemoryTracker* tracker, MemoryCategory category, Device device,
                                              DType dtype, int64_t numel) {
  ASSIGN_OR_RETURN(Buffer buf, Allocate(tracker, category, device, dtype, numel));
  RETURN_IF_ERROR(DeviceMemset(buf.data(), device, 0, static_cast<size_t>(buf.bytes())));
  return buf;
}

void Buffer::Reset() {
  if (data_ == nullptr && numel_ == 0) return;
  const step_profile::Scope profile(step_profile::Category::kAllocation);
  if (tracker_ != nullptr) tracker_->Freed(category_, bytes());
  DeviceFree(device_, data_);
  data_ = nullptr;
  numel_ = 0;
  tracker_ = nullptr;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::DebugString() const {
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(shape, ", "), "]");
}

TensorView ViewOf(Buffer& buf, std::vector<int64_t> shape) {
  TensorView v;
  v.data = buf.data();
  v.dtype = buf.dtype();
  v.shape = std::move(shape);
  v.device = buf.device();
  return v;
}

TensorView ViewOf(const Buffer& buf, std::vector<int64_t> shape) {
  return ViewOf(const_cast<Buffer&>(buf), std::move(shape));
}

}  // namespace zeroshard
