// Token files: llm.c's format and raw uint16 (nanoGPT) files, read whole into
// memory and validated against the model's vocabulary.
//
// llm.c format (docs/data.md): a header of 256 little-endian int32 values
// (header[0] = 20240520 magic, header[1] = 1 version, header[2] = token
// count), then exactly `count` little-endian uint16 tokens.
// Raw format: the file is nothing but little-endian uint16 tokens.
#ifndef ZEROSHARD_DATA_TOKEN_FILE_H_
#define ZEROSHARD_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zeroshard {

inline constexpr int32_t kLlmcTokenMagic = 20240520;
inline constexpr int32_t kLlmcTokenVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;

enum class TokenFileFormat { kLlmc, kRawU16 };

// An immutable sequence of token ids, every one < vocab_size. Files are
// memory-mapped read-only (a multi-GB corpus costs page cache, not heap);
// every token is validated once by Open. Cheap to move and to copy (copies
// share the mapping); const methods may be called concurrently.
class TokenDataset {
 public:
  // Reads `path` in `format`. Errors:
  //   kNotFound          the file cannot be opened;
  //   kDataLoss          wrong magic or version (found and expected values),
  //                      truncated or oversized file (expected vs actual
  //                      bytes), odd byte count of a raw file;
  //   kInvalidArgument   vocab_size outside [1, 65536], or a token >= vocab_size
  //                      (names its position and value).
  static absl::StatusOr<TokenDataset> Open(const std::string& path, int vocab_size,
                                           TokenFileFormat format = TokenFileFormat::kLlmc);
  // Same validation for tokens already in memory (`source` names them in errors).
  static absl::StatusOr<TokenDataset> FromTokens(std::vector<uint16_t> tokens, int vocab_size,
                                                 const std::string& source = "<memory>");

  int64_t num_tokens() const { return num_tokens_; }
  int vocab_size() const { return vocab_size_; }
  absl::Span<const uint16_t> tokens() const { return absl::MakeConstSpan(data_, static_cast<size_t>(num_tokens_)); }
  const std::string& source() const { return source_; }

 private:
  // Keeps the tokens alive: a std::vector or a file mapping.
  std::shared_ptr<const void> owner_;
  const uint16_t* data_ = nullptr;
  int64_t num_tokens_ = 0;
  int vocab_size_ = 0;
  std::string source_;
};

// Writes `tokens` as an llm.c token file (header + uint16 tokens), replacing
// `path`. kInternal naming the path on an I/O error.
absl::Status WriteLlmcTokenFile(const std::string& path, absl::Span<const uint16_t> tokens);

}  // namespace zeroshard

#endif  // ZEROSHARD_DATA_TOKEN_FILE_H_
