#include "data/byte_tokens.h"

namespace zeroshard {

std::vector<uint16_t> BytesToTokens(absl::string_view text) {
  std::vector<uint16_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

}  // namespace zeroshard
