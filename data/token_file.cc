#include "data/token_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

// Token files are little-endian; this engine only builds for little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian");

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open token file ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading token file ", path));
  return bytes;
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
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": token ", tokens[i], " at position ", i,
                                                     " is >= vocab_size ", vocab_size));
    }
  }
  TokenDataset ds;
  ds.tokens_ = std::move(tokens);
  ds.vocab_size_ = vocab_size;
  ds.source_ = source;
  return ds;
}

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::string& path, int vocab_size, TokenFileFormat format) {
  RETURN_IF_ERROR(CheckVocab(vocab_size));
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
  const int64_t size = static_cast<int64_t>(bytes.size());
  int64_t offset = 0;
  int64_t count = 0;
  if (format == TokenFileFormat::kLlmc) {
    if (size < kLlmcHeaderBytes) {
      return absl::DataLossError(absl::StrCat(path, ": truncated llm.c token file: ", size,
                                              " bytes, expected at least the ", kLlmcHeaderBytes,
                                              "-byte header"));
    }
    int32_t header[3];
    std::memcpy(header, bytes.data(), sizeof(header));
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
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  if (count > 0) std::memcpy(tokens.data(), bytes.data() + offset, static_cast<size_t>(2 * count));
  return FromTokens(std::move(tokens), vocab_size, path);
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
