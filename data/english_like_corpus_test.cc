#include "data/english_like_corpus.h"

#include <cctype>

#include "data/byte_tokens.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(EnglishLikeCorpusTest, DeterministicPrefixStableAndPrintable) {
  const std::string a = GenerateEnglishLikeText(7, 20000);
  EXPECT_EQ(a.size(), 20000u);
  EXPECT_EQ(a, GenerateEnglishLikeText(7, 20000));
  EXPECT_EQ(a.substr(0, 5000), GenerateEnglishLikeText(7, 5000));
  EXPECT_NE(a, GenerateEnglishLikeText(8, 20000));
  for (char c : a) EXPECT_TRUE(std::isprint(static_cast<unsigned char>(c)) || c == '\n') << int(c);
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(a[0])));
  EXPECT_NE(a.find(". "), std::string::npos);
}

TEST(ByteTokensTest, TokenIsTheByteValue) {
  const std::vector<uint16_t> t = BytesToTokens(std::string("A\n\xff", 3));
  EXPECT_EQ(t, (std::vector<uint16_t>{65, 10, 255}));
}

}  // namespace
}  // namespace zeroshard
