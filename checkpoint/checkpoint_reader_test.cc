// The reader against checkpoints written by the offline writer: every range
// at every dp, and corruption: every single-byte flip of every shard file
// and of the manifest is caught, naming the file (and the tensor when the
// byte is tensor data).
#include "checkpoint/checkpoint_reader.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/manifest.h"
#include "checkpoint/testing/checkpoint_fixture.h"
#include "core/file_io.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using testing::FixtureManifest;
using testing::FlatValues;

struct Written {
  std::string root, dir;
  CheckpointManifest manifest;
  uint32_t seed = 0;  // of the values, for the caller's SCOPED_TRACE
  FlatValues values;
};

Written Write(const std::string& name, int dp) {
  Written w;
  w.root = testing::FreshTempDir(name);
  w.manifest = FixtureManifest(dp, 9);
  w.seed = TestSeed();
  w.values = testing::RandomFlatValues(w.manifest, w.seed);
  absl::StatusOr<std::string> dir = testing::WriteFixture(w.root, w.manifest, w.values);
  EXPECT_TRUE(dir.ok()) << dir.status();
  if (dir.ok()) w.dir = *dir;
  return w;
}

// In place, without fsync: thousands of flips must stay fast.
void FlipByte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x01;
  f.seekp(offset);
  f.write(&c, 1);
}

TEST(CheckpointReaderTest, ReadsEveryRangeAtEveryDp) {
  for (int dp : {1, 2, 3, 4}) {
    Written w = Write(absl::StrCat("reader_ranges_", dp), dp);
    SCOPED_TRACE(::testing::Message() << "values seed " << w.seed);
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(w.root);  // follows latest
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(reader->dir(), w.dir);
    EXPECT_EQ(reader->dp(), dp);
    for (int u = 0; u < 4; ++u) {
      const int64_t n = w.manifest.units(u).numel();
      for (int k = 0; k < 3; ++k) {
        const std::string kind = w.manifest.kinds(k);
        for (int64_t begin = 0; begin <= n; begin += 3) {
          for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, n - begin}) {
            if (begin + count > n) continue;
            std::vector<float> out(static_cast<size_t>(count), std::nanf(""));
            ASSERT_TRUE(reader->ReadFlat(u, kind, begin, count, out.data()).ok());
            EXPECT_EQ(out, std::vector<float>(w.values[u][k].begin() + begin, w.values[u][k].begin() + begin + count))
                << "dp " << dp << " unit " << u << " kind " << kind << " [" << begin << ", +" << count << ")";
          }
        }
      }
    }
    // Padding reads as zeros; past the padded size is an error.
    const int64_t padded = reader->layouts()[1].padded_numel();
    std::vector<float> pad(static_cast<size_t>(padded - 30), std::nanf(""));
    ASSERT_TRUE(reader->ReadFlat(1, "master", 30, padded - 30, pad.data()).ok());
    for (float x : pad) EXPECT_EQ(x, 0.0f);
    float x;
    EXPECT_EQ(reader->ReadFlat(1, "master", padded, 1, &x).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(reader->ReadFlat(1, "momentum", 0, 1, &x).code(), absl::StatusCode::kNotFound);
    absl::StatusOr<std::vector<float>> bias = reader->ReadParam(1, 1, "exp_avg_sq");
    ASSERT_TRUE(bias.ok());
    EXPECT_EQ(*bias, std::vector<float>(w.values[1][2].begin() + 24, w.values[1][2].end()));
    for (int r = 0; r < dp; ++r) EXPECT_TRUE(reader->VerifyFile(r).ok()) << reader->VerifyFile(r);
  }
}

TEST(CheckpointReaderTest, EverySingleByteFlipOfAShardFileIsCaught) {
  Written w = Write("reader_flip", 2);
  SCOPED_TRACE(::testing::Message() << "values seed " << w.seed);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(w.dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int checked = 0;
  for (int r = 0; r < 2; ++r) {
    const CheckpointFile& f = reader->manifest().files(r);
    const std::string path = JoinPath(w.dir, f.path());
    const int64_t size = *FileSize(path);
    const int64_t data_begin = 8 + f.header_bytes();
    for (int64_t i = 0; i < size; ++i) {
      FlipByte(path, i);
      absl::Status s = reader->VerifyFile(r);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "byte " << i << " of " << path << ": " << s;
      EXPECT_NE(s.message().find(path), std::string::npos) << s;
      if (i >= data_begin) {
        // The tensor holding the byte is named.
        for (const CheckpointTensor& t : f.tensors()) {
          if (i - data_begin >= t.data_begin() && i - data_begin < t.data_end()) {
            EXPECT_NE(s.message().find(absl::StrCat("tensor '", t.name(), "'")), std::string::npos) << s;
          }
        }
      }
      FlipByte(path, i);
      ++checked;
    }
    EXPECT_TRUE(reader->VerifyFile(r).ok());
  }
  EXPECT_GT(checked, 1000);
}

TEST(CheckpointReaderTest, EverySingleByteFlipOfTheManifestIsCaught) {
  Written w = Write("reader_manifest_flip", 3);
  SCOPED_TRACE(::testing::Message() << "values seed " << w.seed);
  const std::string path = JoinPath(w.dir, kManifestFileName);
  const int64_t size = *FileSize(path);
  for (int64_t i = 0; i < size; ++i) {
    FlipByte(path, i);
    absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(w.dir);
    ASSERT_FALSE(reader.ok()) << "byte " << i;
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kDataLoss) << "byte " << i << ": " << reader.status();
    EXPECT_NE(reader.status().message().find(path), std::string::npos) << reader.status();
    FlipByte(path, i);
  }
  EXPECT_TRUE(CheckpointReader::Open(w.dir).ok());
}

TEST(CheckpointReaderTest, TruncatedAndMissingFiles) {
  Written w = Write("reader_truncated", 2);
  SCOPED_TRACE(::testing::Message() << "values seed " << w.seed);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(w.dir);
  ASSERT_TRUE(reader.ok());
  const std::string path1 = JoinPath(w.dir, "shard_pp000_dp00001_tp000.safetensors");
  std::string bytes = *ReadFileToString(path1);
  ASSERT_TRUE(WriteFileDurably(path1, {absl::string_view(bytes).substr(0, bytes.size() - 5)}).ok());
  absl::Status s = reader->VerifyFile(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), absl::StrCat("'", path1, "' has ", bytes.size() - 5, " bytes, the manifest says ",
                                      bytes.size(), " (truncated)"));
  std::vector<float> out(64);
  EXPECT_EQ(reader->ReadFlat(0, "master", 0, 64, out.data()).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(RemoveTree(JoinPath(w.dir, "shard_pp000_dp00000_tp000.safetensors")).ok());
  s = reader->VerifyFile(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("shard file of dp rank 0 is missing"), std::string::npos) << s;
  EXPECT_EQ(CheckpointReader::Open(JoinPath(w.root, "nope")).status().code(), absl::StatusCode::kNotFound);
}

// A header that is self-consistent (checksummed in the manifest, tensors
// tiling the file) but names its tensors otherwise than the manifest:
// refused naming both, not read under the wrong names.
TEST(CheckpointReaderTest, HeaderThatDisagreesWithTheManifestIsRefusedNamingBoth) {
  Written w = Write("reader_header_disagrees", 2);
  absl::StatusOr<std::string> manifest_text = ReadFileToString(JoinPath(w.dir, kManifestFileName));
  ASSERT_TRUE(manifest_text.ok());
  absl::StatusOr<CheckpointManifest> m = DecodeManifest(*manifest_text, "manifest");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_GT(m->files_size(), 0);
  CheckpointFile* f = m->mutable_files(0);
  const std::string path = JoinPath(w.dir, f->path());
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  std::string header = bytes->substr(0, static_cast<size_t>(8 + f->header_bytes()));
  // Swap the names of two tensors of equal length in the header.
  const size_t a = header.find("\"unit.0.master\""), b = header.find("\"unit.1.master\"");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  header.replace(a, 15, "\"unit.1.master\"");
  header.replace(b, 15, "\"unit.0.master\"");
  ASSERT_TRUE(WriteFileDurably(path, {header, absl::string_view(*bytes).substr(header.size())}).ok());
  f->set_header_crc32c(Crc32c(header));
  ASSERT_TRUE(WriteFileDurably(JoinPath(w.dir, kManifestFileName), {EncodeManifest(*m)}).ok());
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(w.dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const absl::Status s = reader->VerifyFile(0);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  const CheckpointTensor& t0 = f->tensors(0);
  const std::string swapped = t0.name() == "unit.0.master" ? "unit.1.master" : "unit.0.master";
  EXPECT_EQ(s.message(), absl::StrCat("'", path, "': tensor 0 in the header is '", swapped, "' at [", t0.data_begin(), ", ", t0.data_end(), "), the manifest says '",
                                      t0.name(), "' at [", t0.data_begin(), ", ", t0.data_end(), ")"))
      << s;
}

}  // namespace
}  // namespace zeroshard
