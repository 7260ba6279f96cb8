// Byte-level tokenization: token id = byte value, vocabulary 256.
#ifndef ZEROSHARD_DATA_BYTE_TOKENS_H_
#define ZEROSHARD_DATA_BYTE_TOKENS_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace zeroshard {

inline constexpr int kByteVocabSize = 256;

std::vector<uint16_t> BytesToTokens(absl::string_view text);

}  // namespace zeroshard

#endif  // ZEROSHARD_DATA_BYTE_TOKENS_H_
