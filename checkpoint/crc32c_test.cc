#include "checkpoint/crc32c.h"

#include <random>
#include <string>

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Bit-at-a-time reference: slow, obviously the definition.
uint32_t ReferenceCrc32c(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? 0x82F63B78u : 0u);
  }
  return ~c;
}

TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 B.4: 32 bytes of zeros, and of 0xFF.
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(Crc32cTest, MatchesReferenceAndExtendsAtEverySplit) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int len : {1, 7, 8, 9, 15, 16, 17, 63, 200}) {
    std::string s(len, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const uint32_t want = ReferenceCrc32c(s);
    EXPECT_EQ(Crc32c(s), want) << "len " << len;
    for (int split = 0; split <= len; ++split) {
      EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), split), s.data() + split, len - split), want)
          << "len " << len << " split " << split;
    }
  }
}

}  // namespace
}  // namespace zeroshard
