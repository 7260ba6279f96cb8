#include "checkpoint/safetensors.h"

#include <cstdlib>
#include <cstring>
#include <random>

#include "checkpoint/crc32c.h"
#include "checkpoint/safetensors_file.h"
#include "core/file_io.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string Tmp(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return JoinPath(base != nullptr ? base : "/tmp", name);
}

// The 8-byte length prefix + text, unpadded.
std::string Header(const std::string& json) {
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

TEST(SafetensorsTest, EncodesTheDocumentedLayoutByteForByte) {
  const float a[2] = {1.0f, -2.0f};
  const uint16_t b[3] = {1, 2, 3};
  std::vector<SafetensorsTensorInfo> layout;
  absl::StatusOr<std::string> header = EncodeSafetensorsHeader(
      {{"a", DType::kF32, {2}, a}, {"b.w", DType::kBF16, {1, 3}, b}}, {{"step", "7"}}, &layout);
  ASSERT_TRUE(header.ok()) << header.status();
  const std::string json =
      "{\"__metadata__\":{\"step\":\"7\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b.w\":{\"dtype\":\"BF16\",\"shape\":[1,3],\"data_offsets\":[8,14]}}";
  std::string padded = json;
  while ((8 + padded.size()) % 8 != 0) padded += ' ';
  EXPECT_EQ(*header, Header(padded));
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_EQ(layout[1].data_begin, 8);
  EXPECT_EQ(layout[1].data_end, 14);
}

TEST(SafetensorsTest, WriteThenReadRoundTripsEveryDtype) {
  const uint32_t seed = TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::vector<float> f32(37);
  for (float& x : f32) x = std::normal_distribution<float>()(rng);
  std::vector<uint16_t> bf16(5), f16(6);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = F32ToBF16(f32[i]);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = F32ToF16(f32[i]);
  const std::string path = Tmp("st_roundtrip.safetensors");
  absl::StatusOr<SafetensorsWriteResult> w = WriteSafetensors(
      path, {{"x", DType::kF32, {37}, f32.data()}, {"y", DType::kBF16, {5}, bf16.data()},
             {"z", DType::kF16, {2, 3}, f16.data()}, {"empty", DType::kF32, {0}, nullptr}},
      {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*FileSize(path), w->file_bytes);
  EXPECT_EQ(w->tensor_crc32c[0], Crc32c(f32.data(), 37 * 4));
  const std::string bytes = *ReadFileToString(path);
  EXPECT_EQ(w->header_crc32c, Crc32c(bytes.data(), 8 + w->header_bytes));
  EXPECT_EQ((8 + w->header_bytes) % 8, 0);

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->header().tensors.size(), 4u);
  std::vector<float> out(37, std::nanf(""));
  ASSERT_TRUE(file->ReadAsF32("x", 0, 37, out.data()).ok());
  EXPECT_EQ(out, f32);
  ASSERT_TRUE(file->ReadAsF32("x", 30, 7, out.data()).ok());
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 7), std::vector<float>(f32.begin() + 30, f32.end()));
  ASSERT_TRUE(file->ReadAsF32("y", 1, 4, out.data()).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], BF16ToF32(bf16[i + 1]));
  ASSERT_TRUE(file->ReadAsF32("z", 0, 6, out.data()).ok());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], F16ToF32(f16[i]));
  EXPECT_EQ(file->ReadAsF32("x", 30, 8, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file->ReadAsF32("nope", 0, 1, out.data()).code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, StreamedWriteAsksForEachTensorOnceInOrderAndMatchesTheWholeWrite) {
  const float a[3] = {1.0f, 2.0f, 3.0f}, c[2] = {-1.0f, 0.5f};
  const std::vector<SafetensorsTensorData> tensors = {
      {"a", DType::kF32, {3}, a}, {"empty", DType::kF32, {0}, nullptr}, {"c", DType::kF32, {2}, c}};
  const std::string whole = Tmp("st_whole.safetensors"), streamed = Tmp("st_streamed.safetensors");
  absl::StatusOr<SafetensorsWriteResult> w = WriteSafetensors(whole, tensors, {{"k", "v"}});
  ASSERT_TRUE(w.ok()) << w.status();
  // One staging buffer, refilled for every tensor: each piece is written
  // before the next is asked for.
  std::vector<float> staging;
  std::vector<size_t> asked;
  absl::StatusOr<SafetensorsWriteResult> s = WriteSafetensorsStreamed(
      streamed, tensors, {{"k", "v"}}, [&](size_t i) -> absl::StatusOr<const void*> {
        asked.push_back(i);
        const float* src = static_cast<const float*>(tensors[i].data);
        staging.assign(src, src + tensors[i].shape[0]);
        return staging.data();
      });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(asked, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(*ReadFileToString(streamed), *ReadFileToString(whole));
  EXPECT_EQ(s->file_bytes, w->file_bytes);
  EXPECT_EQ(s->header_crc32c, w->header_crc32c);
  EXPECT_EQ(s->tensor_crc32c, w->tensor_crc32c);
  ASSERT_EQ(s->tensor_crc32c.size(), 3u);
  EXPECT_EQ(s->tensor_crc32c[2], Crc32c(c, sizeof(c)));
}

TEST(SafetensorsTest, StreamedWriteErrorRemovesThePartialFile) {
  const float a[2] = {1.0f, 2.0f};
  const std::string path = Tmp("st_streamed_error.safetensors");
  absl::StatusOr<SafetensorsWriteResult> s = WriteSafetensorsStreamed(
      path, {{"a", DType::kF32, {2}, a}, {"b", DType::kF32, {2}, a}}, {},
      [&](size_t i) -> absl::StatusOr<const void*> {
        if (i == 1) return absl::DataLossError("offload file truncated");
        return a;
      });
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.status().message(), "offload file truncated");
  EXPECT_FALSE(PathExists(path));
}

TEST(SafetensorsTest, I8IsOneBytePerElement) {
  EXPECT_STREQ(SafetensorsDTypeName(DType::kI8), "I8");
  EXPECT_EQ(*SafetensorsDTypeFromName("I8"), DType::kI8);
  const std::string json = "{\"q\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}";
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensorsHeader(Header(json) + "abc", 8 + json.size() + 3);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->tensors.size(), 1u);
  EXPECT_EQ(h->tensors[0].dtype, DType::kI8);
}

TEST(SafetensorsTest, RejectsBadNamesWhenWriting) {
  std::vector<SafetensorsTensorInfo> layout;
  const float x = 0;
  EXPECT_EQ(EncodeSafetensorsHeader({{"a", DType::kF32, {1}, &x}, {"a", DType::kF32, {1}, &x}}, {}, &layout)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSafetensorsHeader({{"__metadata__", DType::kF32, {1}, &x}}, {}, &layout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSafetensorsHeader({{"a", DType::kF32, {-1}, &x}}, {}, &layout).status().code(),
            absl::StatusCode::kInvalidArgument);
}

struct BadCase {
  const char* what;
  std::string file;
  const char* message;
};

TEST(SafetensorsTest, ParserRejectsMalformedHeadersWithDataLoss) {
  const std::string ok_json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string data(8, 'x');
  ASSERT_TRUE(ParseSafetensorsHeader(Header(ok_json) + data, 8 + ok_json.size() + 8).ok());
  std::string huge(8, '\xff');
  const std::vector<BadCase> cases = {
      {"short", "abc", "fewer than the 8-byte header length"},
      {"length past the end", huge + "{}", "exceeds the file's"},
      {"not json", Header("{nope") + data, "not a valid JSON object"},
      {"not an object", Header("[1,2]") + data, "does not start with '{'"},
      {"truncated data", Header(ok_json) + "xxxx", "file truncated"},
      {"trailing data", Header(ok_json) + data + "y", "trailing bytes"},
      {"unknown dtype", Header("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}") + data,
       "dtype \"F64\""},
      {"size mismatch", Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}") + data,
       "needs 3 x 4"},
      {"negative dim", Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}") + data,
       "is not a dimension"},
      {"gap", Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}") + data,
       "starts at data byte 4, expected 0"},
      {"overlap",
       Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}") +
           data,
       "expected 8"},
      {"tensor defined twice",
       Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}") +
           data,
       "safetensors header defines 'a' twice"},
      {"metadata twice", Header("{\"__metadata__\":{},\"__metadata__\":{}}"),
       "safetensors header defines '__metadata__' twice"},
      {"missing offsets", Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}") + data, "data_offsets"},
      {"bad metadata", Header("{\"__metadata__\":{\"k\":1}}"), "is not a string"},
      {"huge shape",
       Header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}") + data,
       "too many elements"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<SafetensorsHeader> h = ParseSafetensorsHeader(c.file, static_cast<int64_t>(c.file.size()));
    ASSERT_FALSE(h.ok()) << c.what;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << c.what;
    EXPECT_NE(h.status().message().find(c.message), std::string::npos) << c.what << ": " << h.status();
  }
}

}  // namespace
}  // namespace zeroshard
