#include "data/token_file.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

class TokenFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

  void WriteBytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }

  std::string ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::vector<uint16_t> RandomTokens(size_t n, int vocab) {
    std::vector<uint16_t> t(n);
    for (auto& x : t) x = static_cast<uint16_t>(rng_() % vocab);
    return t;
  }

  // A fresh seed per test, traced in every failure message of the test.
  const uint32_t seed_ = TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::mt19937 rng_{seed_};
};

TEST_F(TokenFileTest, WritesLlmcLayoutByteForByte) {
  const std::string path = Path("layout.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, std::vector<uint16_t>{0x0102, 0xfffe, 7}).ok());
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 1024u + 6u);
  int32_t header[256];
  std::memcpy(header, bytes.data(), 1024);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 3);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(header[i], 0) << i;
  // Little-endian uint16 tokens.
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024]), 0x02);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1025]), 0x01);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1026]), 0xfe);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1027]), 0xff);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1028]), 7);
}

TEST_F(TokenFileTest, RoundTripsRandomTokens) {
  const auto tokens = RandomTokens(5000, 50257);
  const std::string path = Path("roundtrip.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, tokens).ok());
  auto ds = TokenDataset::Open(path, 50257);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_tokens(), 5000);
  EXPECT_EQ(std::vector<uint16_t>(ds->tokens().begin(), ds->tokens().end()), tokens);
}

TEST_F(TokenFileTest, ReadsRawUint16Files) {
  const auto tokens = RandomTokens(777, 300);
  const std::string path = Path("raw.bin");
  WriteBytes(path, std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2));
  auto ds = TokenDataset::Open(path, 300, TokenFileFormat::kRawU16);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(std::vector<uint16_t>(ds->tokens().begin(), ds->tokens().end()), tokens);
}

TEST_F(TokenFileTest, WrongMagicNamesFoundAndExpected) {
  const std::string path = Path("magic.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, std::vector<uint16_t>{1, 2, 3}).ok());
  std::string bytes = ReadBytes(path);
  const int32_t bad = 12345;
  std::memcpy(&bytes[0], &bad, 4);
  WriteBytes(path, bytes);
  auto ds = TokenDataset::Open(path, 256);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("bad magic 12345, expected 20240520"), std::string::npos)
      << ds.status();
}

TEST_F(TokenFileTest, WrongVersionIsDataLoss) {
  const std::string path = Path("version.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, std::vector<uint16_t>{1}).ok());
  std::string bytes = ReadBytes(path);
  const int32_t v = 2;
  std::memcpy(&bytes[4], &v, 4);
  WriteBytes(path, bytes);
  auto ds = TokenDataset::Open(path, 256);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("version 2, expected 1"), std::string::npos) << ds.status();
}

TEST_F(TokenFileTest, TruncatedFileNamesExpectedAndActualSize) {
  const std::string path = Path("trunc.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, RandomTokens(100, 256)).ok());
  std::string bytes = ReadBytes(path);
  bytes.resize(bytes.size() - 3);
  WriteBytes(path, bytes);
  auto ds = TokenDataset::Open(path, 256);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("header says 100 tokens, so 1224 bytes expected, but the file has 1221"),
            std::string::npos)
      << ds.status();
}

TEST_F(TokenFileTest, TruncatedHeaderAndTrailingBytesAreDataLoss) {
  const std::string path = Path("short.bin");
  WriteBytes(path, std::string(100, '\0'));
  auto ds = TokenDataset::Open(path, 256);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("100 bytes, expected at least the 1024-byte header"), std::string::npos)
      << ds.status();

  ASSERT_TRUE(WriteLlmcTokenFile(path, std::vector<uint16_t>{1, 2}).ok());
  WriteBytes(path, ReadBytes(path) + "xy");
  ds = TokenDataset::Open(path, 256);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("header says 2 tokens (1028 bytes) but the file has 1030"), std::string::npos)
      << ds.status();
}

TEST_F(TokenFileTest, OddRawFileIsDataLoss) {
  const std::string path = Path("odd.bin");
  WriteBytes(path, "abc");
  auto ds = TokenDataset::Open(path, 256, TokenFileFormat::kRawU16);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(ds.status().message().find("odd size of 3 bytes"), std::string::npos) << ds.status();
}

TEST_F(TokenFileTest, TokenOutsideVocabNamesPositionAndValue) {
  std::vector<uint16_t> tokens = RandomTokens(64, 100);
  tokens[41] = 100;
  const std::string path = Path("vocab.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, tokens).ok());
  auto ds = TokenDataset::Open(path, 100);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("token 100 at position 41 is >= vocab_size 100"), std::string::npos)
      << ds.status();
  EXPECT_TRUE(TokenDataset::Open(path, 101).ok());
}

TEST_F(TokenFileTest, CopiesKeepTheMappingAlive) {
  const auto tokens = RandomTokens(3000, 1000);
  const std::string path = Path("shared.bin");
  ASSERT_TRUE(WriteLlmcTokenFile(path, tokens).ok());
  TokenDataset copy;
  {
    auto ds = TokenDataset::Open(path, 1000);
    ASSERT_TRUE(ds.ok()) << ds.status();
    copy = *ds;
  }
  std::remove(path.c_str());  // the mapping outlives the directory entry too
  EXPECT_EQ(std::vector<uint16_t>(copy.tokens().begin(), copy.tokens().end()), tokens);
}

TEST_F(TokenFileTest, EmptyRawFileHasNoTokens) {
  const std::string path = Path("empty.bin");
  WriteBytes(path, "");
  auto ds = TokenDataset::Open(path, 256, TokenFileFormat::kRawU16);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_tokens(), 0);
}

TEST_F(TokenFileTest, MissingFileIsNotFound) {
  auto ds = TokenDataset::Open(Path("does_not_exist.bin"), 256);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("does_not_exist.bin"), std::string::npos);
}

TEST_F(TokenFileTest, RejectsVocabOutsideUint16) {
  EXPECT_EQ(TokenDataset::FromTokens({1}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenDataset::FromTokens({1}, 65537).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(TokenDataset::FromTokens({65535}, 65536).ok());
}

}  // namespace
}  // namespace zeroshard
