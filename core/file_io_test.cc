#include "core/file_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string Tmp(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return JoinPath(base != nullptr ? base : "/tmp", name);
}

TEST(FileIoTest, WriteReadRangeAndSize) {
  const std::string dir = Tmp("file_io_a");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(JoinPath(dir, "x/y")).ok());
  const std::string path = JoinPath(dir, "x/y/f");
  ASSERT_TRUE(WriteFileDurably(path, {"abc", "", "defg"}).ok());
  ASSERT_TRUE(SyncDirectory(JoinPath(dir, "x/y")).ok());
  EXPECT_EQ(*FileSize(path), 7);
  EXPECT_EQ(*ReadFileToString(path), "abcdefg");
  char buf[3];
  ASSERT_TRUE(ReadFileRange(path, 2, 3, buf).ok());
  EXPECT_EQ(std::string(buf, 3), "cde");
  absl::Status past = ReadFileRange(path, 5, 3, buf);
  EXPECT_EQ(past.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(past.message().find("ends at byte 7, expected at least 8"), std::string::npos) << past;
  EXPECT_EQ(*ListDirectory(JoinPath(dir, "x")), std::vector<std::string>{"y"});
}

TEST(FileIoTest, MissingPathsAreNotFound) {
  const std::string dir = Tmp("file_io_b");
  ASSERT_TRUE(RemoveTree(dir).ok());
  EXPECT_EQ(FileSize(JoinPath(dir, "nope")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadFileToString(JoinPath(dir, "nope")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ListDirectory(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(PathExists(dir));
  EXPECT_TRUE(RemoveTree(dir).ok());
}

TEST(FileIoTest, RenameReplacesFile) {
  const std::string dir = Tmp("file_io_c");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileDurably(JoinPath(dir, "a"), {"new"}).ok());
  ASSERT_TRUE(WriteFileDurably(JoinPath(dir, "b"), {"old"}).ok());
  ASSERT_TRUE(RenamePath(JoinPath(dir, "a"), JoinPath(dir, "b")).ok());
  EXPECT_EQ(*ReadFileToString(JoinPath(dir, "b")), "new");
  EXPECT_FALSE(PathExists(JoinPath(dir, "a")));
  EXPECT_EQ(RenamePath(JoinPath(dir, "a"), JoinPath(dir, "c")).code(), absl::StatusCode::kNotFound);
}

TEST(FileIoTest, ExchangeSwapsTwoDirectories) {
  const std::string dir = Tmp("file_io_d");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(JoinPath(dir, "a")).ok());
  ASSERT_TRUE(MakeDirectories(JoinPath(dir, "b")).ok());
  ASSERT_TRUE(WriteFileDurably(JoinPath(dir, "a/f"), {"from a"}).ok());
  ASSERT_TRUE(WriteFileDurably(JoinPath(dir, "b/f"), {"from b"}).ok());
  absl::Status s = ExchangePaths(JoinPath(dir, "a"), JoinPath(dir, "b"));
  if (absl::IsUnimplemented(s)) GTEST_SKIP() << "this file system cannot exchange atomically: " << s;
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(*ReadFileToString(JoinPath(dir, "a/f")), "from b");
  EXPECT_EQ(*ReadFileToString(JoinPath(dir, "b/f")), "from a");
  EXPECT_EQ(ExchangePaths(JoinPath(dir, "a"), JoinPath(dir, "missing")).code(), absl::StatusCode::kNotFound);
}

// Clears the injected fault however the test ends.
struct FaultScope {
  explicit FaultScope(std::function<int(FileOp, const std::string&)> fault) {
    SetFileFaultForTesting(std::move(fault));
  }
  ~FaultScope() { SetFileFaultForTesting(nullptr); }
};

TEST(FileIoTest, WriteFromAPieceProducerChecksTheTotal) {
  const std::string dir = Tmp("file_io_from");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const std::string path = JoinPath(dir, "f");
  // One buffer reused for every piece.
  std::string piece;
  int calls = 0;
  const auto three_pieces = [&]() -> absl::StatusOr<absl::string_view> {
    if (calls == 3) return absl::string_view();
    piece.assign(2, static_cast<char>('a' + calls++));
    return absl::string_view(piece);
  };
  ASSERT_TRUE(WriteFileDurablyFrom(path, 6, three_pieces).ok());
  EXPECT_EQ(*ReadFileToString(path), "aabbcc");
  calls = 0;
  absl::Status short_write = WriteFileDurablyFrom(path, 7, three_pieces);
  EXPECT_EQ(short_write.code(), absl::StatusCode::kInternal);
  EXPECT_NE(short_write.message().find("produced 6 bytes, expected 7"), std::string::npos) << short_write;
  EXPECT_FALSE(PathExists(path));
  absl::Status failed = WriteFileDurablyFrom(path, 6, []() -> absl::StatusOr<absl::string_view> {
    return absl::UnavailableError("source gone");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(PathExists(path));
}

// Files of 1 MiB and more go through O_DIRECT's aligned staging (or the
// buffered fallback where the filesystem refuses it): pieces of odd sizes
// across staging-buffer boundaries, a padded last block truncated away.
TEST(FileIoTest, LargeFilesRoundTripByteForByte) {
  const std::string dir = Tmp("file_io_large");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const std::string path = JoinPath(dir, "f");
  for (const int64_t total : {int64_t{1} << 20, (int64_t{17} << 20) + 4093}) {
    std::string want(static_cast<size_t>(total), '\0');
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>((i * 2654435761u) >> 13);
    size_t at = 0, calls = 0;
    const auto pieces = [&]() -> absl::StatusOr<absl::string_view> {
      const size_t n = std::min(want.size() - at, size_t{1} + (calls++ * 999331) % (size_t{3} << 20));
      absl::string_view piece(want.data() + at, n);
      at += n;
      return piece;
    };
    ASSERT_TRUE(WriteFileDurablyFrom(path, total, pieces).ok()) << total;
    EXPECT_EQ(*FileSize(path), total);
    EXPECT_TRUE(*ReadFileToString(path) == want) << "the " << total << "-byte file differs";
  }
  FaultScope scope([&](FileOp op, const std::string& p) { return p == path && op == FileOp::kWrite ? ENOSPC : 0; });
  const std::string big(size_t{3} << 20, 'x');
  EXPECT_EQ(WriteFileDurably(path, {big}).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(PathExists(path));
}

TEST(FileIoTest, InjectedFullDiskFailsTheWriteAndRemovesThePartialFile) {
  const std::string dir = Tmp("file_io_e");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const std::string full = JoinPath(dir, "full"), fine = JoinPath(dir, "fine");
  std::vector<FileOp> seen;
  FaultScope scope([&](FileOp op, const std::string& path) {
    if (path == full) seen.push_back(op);
    return path == full && op == FileOp::kWrite ? ENOSPC : 0;
  });
  absl::Status s = WriteFileDurably(full, {"0123456789"});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), absl::StrCat("cannot write '", full, "': No space left on device"));
  EXPECT_FALSE(PathExists(full));
  EXPECT_EQ(seen, (std::vector<FileOp>{FileOp::kCreate, FileOp::kWrite}));
  EXPECT_TRUE(WriteFileDurably(fine, {"x"}).ok());  // other paths are untouched
  EXPECT_EQ(*ReadFileToString(fine), "x");
}

TEST(FileIoTest, InjectedFaultsFailCreateSyncMkdirAndRename) {
  const std::string dir = Tmp("file_io_f");
  ASSERT_TRUE(RemoveTree(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const std::string a = JoinPath(dir, "a"), b = JoinPath(dir, "b");
  ASSERT_TRUE(WriteFileDurably(a, {"a"}).ok());
  FileOp failing = FileOp::kCreate;
  FaultScope scope([&](FileOp op, const std::string& path) { return op == failing ? EACCES : 0; });
  absl::Status create = WriteFileDurably(b, {"b"});
  EXPECT_EQ(create.code(), absl::StatusCode::kPermissionDenied) << create;
  EXPECT_FALSE(PathExists(b));
  failing = FileOp::kSync;
  EXPECT_EQ(WriteFileDurably(b, {"b"}).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(PathExists(b));
  EXPECT_EQ(SyncDirectory(dir).code(), absl::StatusCode::kPermissionDenied);
  failing = FileOp::kMakeDirectory;
  EXPECT_EQ(MakeDirectories(JoinPath(dir, "d")).code(), absl::StatusCode::kPermissionDenied);
  failing = FileOp::kRename;
  absl::Status rename = RenamePath(a, b);
  EXPECT_EQ(rename.code(), absl::StatusCode::kPermissionDenied) << rename;
  EXPECT_NE(rename.message().find(b), std::string::npos) << rename;
  EXPECT_TRUE(PathExists(a));
  SetFileFaultForTesting(nullptr);
  EXPECT_TRUE(RenamePath(a, b).ok());
}

}  // namespace
}  // namespace zeroshard
