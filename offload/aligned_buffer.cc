// AlignedBuffer: posix_memalign'ed host bytes counted in a MemoryTracker.
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "offload/async_io.h"

namespace zeroshard {

AlignedBuffer::~AlignedBuffer() { Reset(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      tracker_(std::exchange(other.tracker_, nullptr)),
      category_(other.category_) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    tracker_ = std::exchange(other.tracker_, nullptr);
    category_ = other.category_;
  }
  return *this;
}

void AlignedBuffer::Reset() {
  if (data_ != nullptr) {
    std::free(data_);
    if (tracker_ != nullptr) tracker_->Freed(category_, bytes_);
  }
  data_ = nullptr;
  bytes_ = 0;
  tracker_ = nullptr;
}

absl::StatusOr<AlignedBuffer> AlignedBuffer::Allocate(int64_t bytes, MemoryTracker* tracker,
                                                      MemoryCategory category) {
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("AlignedBuffer: bytes ", bytes, " < 0"));
  AlignedBuffer buffer;
  buffer.category_ = category;
  if (bytes == 0) return buffer;
  const int64_t rounded = AlignIo(bytes);
  if (tracker != nullptr) {
    absl::Status reserved = tracker->Reserve(category, rounded);
    if (!reserved.ok()) return reserved;
  }
  void* data = nullptr;
  if (::posix_memalign(&data, kIoAlignment, static_cast<size_t>(rounded)) != 0) {
    if (tracker != nullptr) tracker->Freed(category, rounded);
    return absl::ResourceExhaustedError(absl::StrCat("AlignedBuffer: posix_memalign of ", rounded,
                                                     " bytes (", MemoryCategoryName(category), ") failed"));
  }
  std::memset(data, 0, static_cast<size_t>(rounded));
  buffer.data_ = data;
  buffer.bytes_ = rounded;
  buffer.tracker_ = tracker;
  return buffer;
}

}  // namespace zeroshard
