// Fuzz target for the token file reader (data/token_file.h): the first byte
// picks the format (low bit: llm.c or raw uint16) and the vocabulary (256 or
// 65536), the rest is the file. The reader must never crash; a refusal is
// kDataLoss or kInvalidArgument; what it accepts must be exactly the file's
// tokens, each below the vocabulary.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zeroshard;
  if (size == 0) return 0;
  // The file lives in memory (a memfd, opened through its /proc path like
  // any file): on a disk busy with other work, writing it cost each input
  // milliseconds of I/O wait.
  static const int fd = ::memfd_create("token_file_fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0) std::abort();
  const TokenFileFormat format = (data[0] & 1) ? TokenFileFormat::kRawU16 : TokenFileFormat::kLlmc;
  const int vocab = (data[0] & 2) ? 65536 : 256;
  if (::ftruncate(fd, 0) != 0) std::abort();
  for (size_t done = 1; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done - 1));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  absl::StatusOr<TokenDataset> ds = TokenDataset::Open(path, vocab, format);
  if (!ds.ok()) {
    const absl::StatusCode c = ds.status().code();
    if (c != absl::StatusCode::kDataLoss && c != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const int64_t offset = format == TokenFileFormat::kLlmc ? kLlmcHeaderBytes : 0;
  if (offset + 2 * ds->num_tokens() != static_cast<int64_t>(size - 1)) std::abort();
  for (int64_t i = 0; i < ds->num_tokens(); ++i) {
    uint16_t t = 0;
    std::memcpy(&t, data + 1 + offset + 2 * i, 2);
    if (ds->tokens()[i] != t || t >= vocab) std::abort();
  }
  return 0;
}
