// Fuzz target for the manifest decoder and validator. The input is decoded
// as it is (nearly always stopped by the checksum line), and again with a
// correct checksum line appended to it, so mutations reach the text-format
// parser and ValidateManifest. Whatever decodes must re-encode and decode to
// the same manifest, and its layouts must be computable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/manifest.h"

namespace {

void Check(const std::string& text) {
  using namespace zeroshard;
  absl::StatusOr<CheckpointManifest> m = DecodeManifest(text, "fuzz");
  if (!m.ok()) {
    const absl::StatusCode code = m.status().code();
    if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kUnimplemented) std::abort();
    return;
  }
  if (!ValidateManifest(*m).ok()) std::abort();
  if (!LayoutsFromManifest(*m, m->topology().dp()).ok()) std::abort();
  if (!DecodeManifest(EncodeManifest(*m), "again").ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  Check(text);
  // Strip a trailing checksum line if there is one, then append a valid one.
  const size_t line = text.rfind("# crc32c=");
  if (line != std::string::npos && (line == 0 || text[line - 1] == '\n')) text.resize(line);
  if (!text.empty() && text.back() != '\n') text.push_back('\n');
  text += absl::StrFormat("# crc32c=%08x\n", zeroshard::Crc32c(text));
  Check(text);
  return 0;
}
