#include "checkpoint/safetensors_file.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "core/file_io.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  ASSIGN_OR_RETURN(file.header_, ReadSafetensorsHeader(path));
  return file;
}

absl::Status SafetensorsFile::ReadAsF32(absl::string_view name, int64_t begin, int64_t count, float* out) const {
  const SafetensorsTensorInfo* t = header_.Find(name);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("'", path_, "' has no tensor '", name, "'"));
  if (begin < 0 || count < 0 || begin + count > t->numel()) {
    return absl::InvalidArgumentError(absl::StrCat("elements [", begin, ", ", begin + count, ") outside tensor '",
                                                   name, "' of ", t->numel()));
  }
  const int64_t size = static_cast<int64_t>(DTypeSize(t->dtype));
  const int64_t offset = header_.data_offset() + t->data_begin + begin * size;
  switch (t->dtype) {
    case DType::kF32:
      return ReadFileRange(path_, offset, count * 4, out);
    case DType::kBF16:
    case DType::kF16: {
      std::vector<uint16_t> raw(static_cast<size_t>(count));
      RETURN_IF_ERROR(ReadFileRange(path_, offset, count * 2, raw.data()));
      for (int64_t i = 0; i < count; ++i) out[i] = t->dtype == DType::kBF16 ? BF16ToF32(raw[i]) : F16ToF32(raw[i]);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' of '", path_, "' is ",
                                                     SafetensorsDTypeName(t->dtype), ", expected F32, BF16 or F16"));
  }
}

}  // namespace zeroshard
