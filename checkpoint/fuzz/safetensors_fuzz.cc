// Fuzz target for the safetensors header parser: any bytes, read as a whole
// file. The parser must never crash, and what it accepts must satisfy its
// contract (tensors tile the data region exactly, sizes match dtypes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zeroshard;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(bytes, static_cast<int64_t>(size));
  if (!header.ok()) {
    if (header.status().code() != absl::StatusCode::kDataLoss) std::abort();
    return 0;
  }
  int64_t at = 0;
  for (const SafetensorsTensorInfo& t : header->tensors) {
    if (t.data_begin != at) std::abort();
    if (t.data_end - t.data_begin != t.numel() * static_cast<int64_t>(DTypeSize(t.dtype))) std::abort();
    at = t.data_end;
  }
  if (header->data_offset() + at != static_cast<int64_t>(size)) std::abort();
  return 0;
}
