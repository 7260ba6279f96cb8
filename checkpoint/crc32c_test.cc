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

// Each implementation on its own, at lengths and start offsets that leave
// the 8-byte loop with every remainder.
void ExpectMatchesReference(uint32_t (*extend)(uint32_t, const void*, size_t)) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::string buffer(4096 + 8, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (int offset = 0; offset < 8; ++offset) {
    for (int len : {0, 1, 3, 8, 13, 64, 1000, 4096}) {
      const std::string s = buffer.substr(offset, len);
      const uint32_t want = ReferenceCrc32c(s);
      EXPECT_EQ(extend(0, buffer.data() + offset, len), want) << "offset " << offset << " len " << len;
      const int half = len / 2;  // continued, as the shard writer does across pieces
      EXPECT_EQ(extend(extend(0, s.data(), half), s.data() + half, len - half), want) << "len " << len;
    }
  }
}

TEST(Crc32cTest, PortableMatchesReference) { ExpectMatchesReference(&crc32c_internal::ExtendPortable); }

TEST(Crc32cTest, HardwareMatchesReference) {
  if (!crc32c_internal::HardwareAvailable()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32 instruction";
  ExpectMatchesReference(&crc32c_internal::ExtendHardware);
}

}  // namespace
}  // namespace zeroshard
