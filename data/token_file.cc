#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// Token files are little-endian; this engine only builds for little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian");

// A read-only mapping of a whole file, unmapped when the last owner goes.
struct MappedFile {
  std::shared_ptr<const void> owner;
  const char* data = nullptr;
  int64_t size = 0;
};

absl::StatusOr<MappedFile> MapWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open token file ", path, ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat token file ", path, ": ", std::strerror(err)));
  }
  MappedFile f;
  f.size = static_cast<int64_t>(st.st_size);
  if (f.size == 0) {
    ::close(fd);
    return f;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(f.size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid
  if (p == MAP_FAILED) return absl::InternalError(absl::StrCat("cannot map token file ", path, ": ", std::strerror(err)));
  const size_t size = static_cast<size_t>(f.size);
  f.owner = std::shared_ptr<const void>(p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
  f.data = static_cast<const char*>(p);
  return f;
}

absl::Status CheckTokens(const uint16_t* tokens, int64_t n, int vocab_size, const std::string& source) {
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": token ", tokens[i], " at position ", i,
                                                     " is >= vocab_size ", vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckVocab(int vocab_size) {
  if (vocab_size < 1 || vocab_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", vocab_size, " is outside [1, 65536] (tokens are uint16)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenDataset> TokenDataset::FromTokens(std::vector<uint16_t> tokens, int vocab_size,
                                                      const std::string& source) {
  RETURN_IF_ERROR(CheckVocab(vocab_size));
  RETURN_IF_ERROR(CheckTokens(tokens.data(), static_cast<int64_t>(tokens.size()), vocab_size, source));
  auto owned = std::make_shared<const std::vector<uint16_t>>(std::move(tokens));
  TokenDataset ds;
  ds.data_ = owned->data();
  ds.num_tokens_ = static_cast<int64_t>(owned->size());
  ds.owner_ = std::move(owned);
  ds.vocab_size_ = vocab_size;
  ds.source_ = source;
  return ds;
}

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::string& path, int vocab_size, TokenFileFormat format) {
  RETURN_IF_ERROR(CheckVocab(vocab_size));
  ASSIGN_OR_RETURN(MappedFile file, MapWholeFile(path));
  const int64_t size = file.size;
  int64_t offset = 0;
  int64_t count = 0;
  if (format == TokenFileFormat::kLlmc) {
    if (size < kLlmcHeaderBytes) {
      return absl::DataLossError(absl::StrCat(path, ": truncated llm.c token file: ", size,
                                              " bytes, expected at least the ", kLlmcHeaderBytes,
                                              "-byte header"));
    }
    int32_t header[3];
    std::memcpy(header, file.data, sizeof(header));
    if (header[0] != kLlmcTokenMagic) {
      return absl::DataLossError(absl::StrCat(path, ": bad magic ", header[0], ", expected ", kLlmcTokenMagic,
                                              " (llm.c token file); raw uint16 files need TokenFileFormat::kRawU16"));
    }
    if (header[1] != kLlmcTokenVersion) {
      return absl::DataLossError(
          absl::StrCat(path, ": unsupported version ", header[1], ", expected ", kLlmcTokenVersion));
    }
    if (header[2] < 0) {
      return absl::DataLossError(absl::StrCat(path, ": negative token count ", header[2]));
    }
    count = header[2];
    offset = kLlmcHeaderBytes;
    const int64_t expected = kLlmcHeaderBytes + 2 * count;
    if (size < expected) {
      return absl::DataLossError(absl::StrCat(path, ": truncated: header says ", count, " tokens, so ",
                                              expected, " bytes expected, but the file has ", size));
    }
    if (size > expected) {
      return absl::DataLossError(absl::StrCat(path, ": header says ", count, " tokens (", expected,
                                              " bytes) but the file has ", size, " bytes"));
    }
  } else {
    if (size % 2 != 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": raw uint16 token file has an odd size of ", size, " bytes (truncated?)"));
    }
    count = size / 2;
  }
  // The token area starts at byte 0 or 1024 of a page-aligned mapping, so it
  // is suitably aligned for uint16_t.
  const uint16_t* tokens = count > 0 ? reinterpret_cast<const uint16_t*>(file.data + offset) : nullptr;
  RETURN_IF_ERROR(CheckTokens(tokens, count, vocab_size, path));
  TokenDataset ds;
  ds.owner_ = std::move(file.owner);
  ds.data_ = tokens;
  ds.num_tokens_ = count;
  ds.vocab_size_ = vocab_size;
  ds.source_ = path;
  return ds;
}

absl::Status WriteLlmcTokenFile(const std::string& path, absl::Span<const uint16_t> tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("llm.c token files hold at most ", INT32_MAX, " tokens, got ", tokens.size()));
  }
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = kLlmcTokenMagic;
  header[1] = kLlmcTokenVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot create token file ", path));
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("error writing token file ", path));
  return absl::OkStatus();
}

}  // namespace zeroshard
