// The safetensors file layout (Hugging Face): an 8-byte little-endian
// unsigned header length N, N bytes of UTF-8 JSON (possibly padded with
// trailing spaces), then the data region. The JSON object maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets in
// the data region) and may hold "__metadata__", a string-to-string map.
//
// The parser is strict, because it reads files that may be truncated or
// corrupt: every tensor's byte size must equal numel times its dtype's size,
// and the tensors, sorted by offset, must tile the data region exactly (no
// gap, no overlap, nothing after the last one). Every violation is
// kDataLoss naming the tensor and the numbers; the parser never crashes on
// any input (fuzzed by checkpoint/fuzz/safetensors_fuzz.cc).
#ifndef ZEROSHARD_CHECKPOINT_SAFETENSORS_H_
#define ZEROSHARD_CHECKPOINT_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/dtype.h"

namespace zeroshard {

// Header lengths above this are rejected (as the reference implementation does).
inline constexpr int64_t kMaxSafetensorsHeaderBytes = 100 << 20;

// "F32", "F16", "BF16", "I32", "U16", "I8".
const char* SafetensorsDTypeName(DType dtype);
// kInvalidArgument for any other name (safetensors' F64, U8, ... are not read).
absl::StatusOr<DType> SafetensorsDTypeFromName(absl::string_view name);

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  int64_t data_begin = 0;  // bytes, relative to the data region
  int64_t data_end = 0;
  int64_t numel() const;
};

struct SafetensorsHeader {
  int64_t header_bytes = 0;  // N
  std::vector<SafetensorsTensorInfo> tensors;  // in data order
  std::map<std::string, std::string> metadata;

  // First byte of the data region in the file.
  int64_t data_offset() const { return 8 + header_bytes; }
  // nullptr when absent.
  const SafetensorsTensorInfo* Find(absl::string_view name) const;
};

// N from the first 8 bytes of a file of `file_size` bytes. kDataLoss when
// fewer than 8 bytes, or N exceeds the file or kMaxSafetensorsHeaderBytes.
absl::StatusOr<int64_t> ParseSafetensorsHeaderLength(absl::string_view first_bytes, int64_t file_size);

// Parses the header. `prefix` holds at least the file's first 8 + N bytes;
// `file_size` is the whole file's size (it fixes the data region's size).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view prefix, int64_t file_size);

// Reads and parses the header of the file at `path` (not the data).
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

// A tensor to write: `data` points at numel * size bytes of `dtype`.
struct SafetensorsTensorData {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// What a write produced, for manifests: the header's length and checksum
// and each tensor's offsets and checksum, in the order given.
struct SafetensorsWriteResult {
  int64_t file_bytes = 0;
  int64_t header_bytes = 0;       // N
  uint32_t header_crc32c = 0;     // of the 8 + N header bytes
  std::vector<SafetensorsTensorInfo> tensors;
  std::vector<uint32_t> tensor_crc32c;
};

// The 8 + N header bytes for `tensors` laid out in the given order, padded
// with spaces so the data region starts at a multiple of 8 bytes.
// kInvalidArgument for an empty, duplicate or "__metadata__" name, or a
// negative dimension.
absl::StatusOr<std::string> EncodeSafetensorsHeader(const std::vector<SafetensorsTensorData>& tensors,
                                                    const std::map<std::string, std::string>& metadata,
                                                    std::vector<SafetensorsTensorInfo>* layout);

// Writes a complete file (replacing `path`) and fsyncs it.
absl::StatusOr<SafetensorsWriteResult> WriteSafetensors(const std::string& path,
                                                        const std::vector<SafetensorsTensorData>& tensors,
                                                        const std::map<std::string, std::string>& metadata);
// The same, with each tensor's bytes asked for when the file reaches it
// (`tensors[i].data` is not read): `data_of(i)` returns tensor i's bytes,
// valid until the next call, so a writer stages one tensor at a time. It is
// not called for empty tensors; its error ends the write.
absl::StatusOr<SafetensorsWriteResult> WriteSafetensorsStreamed(
    const std::string& path, const std::vector<SafetensorsTensorData>& tensors,
    const std::map<std::string, std::string>& metadata,
    absl::FunctionRef<absl::StatusOr<const void*>(size_t tensor)> data_of);

}  // namespace zeroshard

#endif  // ZEROSHARD_CHECKPOINT_SAFETENSORS_H_
