// Reading tensors of a full-model safetensors file (Hugging Face layout, e.g.
// what `zeroshard ckpt consolidate` writes), converted to f32. The header is
// parsed once by Open (strictly: see safetensors.h); reads are pread calls.
#ifndef ZEROSHARD_CHECKPOINT_SAFETENSORS_FILE_H_
#define ZEROSHARD_CHECKPOINT_SAFETENSORS_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "checkpoint/safetensors.h"

namespace zeroshard {

class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }

  // Elements [begin, begin + count) of tensor `name` (F32, BF16 or F16;
  // kInvalidArgument for other dtypes), as f32 (exact widening). kNotFound
  // for an unknown name, kInvalidArgument for a range outside the tensor.
  absl::Status ReadAsF32(absl::string_view name, int64_t begin, int64_t count, float* out) const;

 private:
  std::string path_;
  SafetensorsHeader header_;
};

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_SAFETENSORS_FILE_H_
