#include "offload/async_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "offload/async_io_testing.h"
#include "offload/loop_filesystem_testing.h"
#include "offload/offload_file.h"

namespace zeroshard {
namespace {

using ::testing::HasSubstr;

std::string TestTmpRoot() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

// A fresh directory per test, removed with its contents afterwards.
std::string MakeTempDir() {
  std::string templ = TestTmpRoot() + "/offload-XXXXXX";
  char* d = ::mkdtemp(templ.data());
  EXPECT_NE(d, nullptr) << std::strerror(errno);
  return templ;
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

void Fill(AlignedBuffer& b, uint8_t seed) {
  auto* p = static_cast<uint8_t*>(b.data());
  for (int64_t i = 0; i < b.bytes(); ++i) p[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
}

AlignedBuffer Buffer(int64_t bytes) {
  auto b = AlignedBuffer::Allocate(bytes, nullptr, MemoryCategory::kOffloadStaging);
  EXPECT_TRUE(b.ok()) << b.status();
  return std::move(b).value();
}

std::unique_ptr<AsyncIo> NewIo(int depth = 8) {
  AsyncIoOptions options;
  options.queue_depth = depth;
  auto io = AsyncIo::Create(options);
  EXPECT_TRUE(io.ok()) << io.status();
  return std::move(io).value();
}

class AsyncIoTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

class AsyncIoDepthTest : public AsyncIoTest, public ::testing::WithParamInterface<int> {};

TEST_P(AsyncIoDepthTest, RoundTripSeveralRegions) {
  auto io = NewIo(GetParam());
  constexpr int64_t kRegion = 256 << 10;
  constexpr int kRegions = 12;
  auto file = io->OpenFile(dir_, "round trip", kRegions * kRegion);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(io->file_bytes(*file), kRegions * kRegion);
  std::vector<AlignedBuffer> out, in;
  std::vector<IoTicket> tickets;
  for (int i = 0; i < kRegions; ++i) {
    out.push_back(Buffer(kRegion));
    in.push_back(Buffer(kRegion));
    Fill(out.back(), static_cast<uint8_t>(i));
    auto t = io->Write(*file, i * kRegion, out.back().data(), kRegion);
    ASSERT_TRUE(t.ok()) << t.status();
    tickets.push_back(*t);
  }
  EXPECT_EQ(io->in_flight(), kRegions);
  for (IoTicket t : tickets) ASSERT_TRUE(io->Wait(t).ok());
  for (int i = kRegions - 1; i >= 0; --i) ASSERT_TRUE(io->Read(*file, i * kRegion, in[i].data(), kRegion).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  EXPECT_EQ(io->in_flight(), 0);
  for (int i = 0; i < kRegions; ++i) {
    EXPECT_EQ(std::memcmp(out[i].data(), in[i].data(), kRegion), 0) << "region " << i;
  }
  const IoStats s = io->stats();
  EXPECT_EQ(s.write_bytes, kRegions * kRegion);
  EXPECT_EQ(s.read_bytes, kRegions * kRegion);
  EXPECT_EQ(s.writes, kRegions);
  EXPECT_EQ(s.reads, kRegions);
  EXPECT_GT(s.busy_seconds, 0);
  io->ResetStats();
  EXPECT_EQ(io->stats().read_bytes, 0);
  EXPECT_EQ(io->stats().busy_seconds, 0);
}

INSTANTIATE_TEST_SUITE_P(Depths, AsyncIoDepthTest, ::testing::Values(1, 8));

TEST_F(AsyncIoTest, ReadAfterOverlappingWriteSeesTheWrite) {
  auto io = NewIo(8);
  constexpr int64_t kBytes = 1 << 20;
  auto file = io->OpenFile(dir_, "raw", 4 * kBytes);
  ASSERT_TRUE(file.ok()) << file.status();
  for (int round = 0; round < 20; ++round) {
    AlignedBuffer out = Buffer(kBytes), in = Buffer(kBytes);
    Fill(out, static_cast<uint8_t>(round * 3 + 1));
    auto w = io->Write(*file, kBytes, out.data(), kBytes);
    // Half overlapping the write: held back until it completes.
    auto r = io->Read(*file, kBytes + kBytes / 2, in.data(), kBytes / 2);
    ASSERT_TRUE(w.ok() && r.ok());
    ASSERT_TRUE(io->Wait(*r).ok());
    ASSERT_TRUE(io->Poll(*w));  // completed before the read was submitted
    ASSERT_TRUE(io->Wait(*w).ok());
    ASSERT_EQ(std::memcmp(static_cast<char*>(out.data()) + kBytes / 2, in.data(), kBytes / 2), 0) << round;
  }
}

TEST_F(AsyncIoTest, ReadIntoABufferStillBeingWrittenWaitsForTheWrite) {
  // A staging slot stored to one region and at once loaded from another:
  // the read is queued behind the write, and Progress alone submits it once
  // the write's completion is reaped.
  auto io = NewIo(8);
  constexpr int64_t kBytes = 1 << 20;
  auto file = io->OpenFile(dir_, "slot reuse", 2 * kBytes);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer next = Buffer(kBytes), slot = Buffer(kBytes), check = Buffer(kBytes);
  Fill(next, 77);
  ASSERT_TRUE(io->Wait(*io->Write(*file, kBytes, next.data(), kBytes)).ok());
  for (int round = 0; round < 20; ++round) {
    Fill(slot, static_cast<uint8_t>(round * 5 + 2));
    AlignedBuffer stored = Buffer(kBytes);
    std::memcpy(stored.data(), slot.data(), kBytes);
    auto w = io->Write(*file, 0, slot.data(), kBytes);
    auto r = io->Read(*file, kBytes, slot.data(), kBytes);
    ASSERT_TRUE(w.ok() && r.ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (io->in_flight() > 0 && absl::Now() < deadline) io->Progress();
    ASSERT_EQ(io->in_flight(), 0) << round;
    ASSERT_TRUE(io->Wait(*w).ok());
    ASSERT_TRUE(io->Wait(*r).ok());
    ASSERT_EQ(std::memcmp(slot.data(), next.data(), kBytes), 0) << "round " << round << ": the load";
    ASSERT_TRUE(io->Wait(*io->Read(*file, 0, check.data(), kBytes)).ok());
    ASSERT_EQ(std::memcmp(check.data(), stored.data(), kBytes), 0) << "round " << round << ": the store";
  }
  EXPECT_EQ(io->stats().writes, 21);
  EXPECT_EQ(io->stats().reads, 40);
}

TEST_F(AsyncIoTest, WriteAfterWriteKeepsTheLast) {
  auto io = NewIo(16);
  constexpr int64_t kBytes = 256 << 10;
  auto file = io->OpenFile(dir_, "waw", kBytes);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<AlignedBuffer> outs;
  for (int i = 0; i < 10; ++i) {
    outs.push_back(Buffer(kBytes));
    Fill(outs.back(), static_cast<uint8_t>(i * 11));
    ASSERT_TRUE(io->Write(*file, 0, outs.back().data(), kBytes).ok());
  }
  AlignedBuffer in = Buffer(kBytes);
  auto r = io->Read(*file, 0, in.data(), kBytes);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(io->WaitAll().ok());
  EXPECT_EQ(std::memcmp(outs.back().data(), in.data(), kBytes), 0);
}

TEST_F(AsyncIoTest, MoreRequestsThanQueueDepthAllComplete) {
  auto io = NewIo(2);
  constexpr int64_t kBlock = 64 << 10;
  auto file = io->OpenFile(dir_, "deep", 64 * kBlock);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer out = Buffer(64 * kBlock), in = Buffer(64 * kBlock);
  Fill(out, 5);
  std::vector<IoTicket> tickets;
  for (int i = 0; i < 64; ++i) {
    tickets.push_back(*io->Write(*file, i * kBlock, static_cast<char*>(out.data()) + i * kBlock, kBlock));
  }
  io->Flush();
  for (int i = 0; i < 64; ++i) {
    tickets.push_back(*io->Read(*file, i * kBlock, static_cast<char*>(in.data()) + i * kBlock, kBlock));
  }
  for (IoTicket t : tickets) ASSERT_TRUE(io->Wait(t).ok());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), out.bytes()), 0);
  EXPECT_EQ(io->stats().writes, 64);
  EXPECT_EQ(io->stats().reads, 64);
}

TEST_F(AsyncIoTest, ProgressAloneDrainsMoreRequestsThanQueueDepth) {
  // Flush submits only queue_depth; Progress reaps and refills, so a caller
  // computing between calls moves every request without waiting on one.
  auto io = NewIo(2);
  constexpr int64_t kBlock = 64 << 10;
  auto file = io->OpenFile(dir_, "progress", 16 * kBlock);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer out = Buffer(16 * kBlock);
  Fill(out, 9);
  std::vector<IoTicket> tickets;
  for (int i = 0; i < 16; ++i) {
    tickets.push_back(*io->Write(*file, i * kBlock, static_cast<char*>(out.data()) + i * kBlock, kBlock));
  }
  EXPECT_EQ(io->in_flight(), 16);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (io->in_flight() > 0 && absl::Now() < deadline) {
    io->Progress();
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(io->in_flight(), 0);
  EXPECT_EQ(io->stats().writes, 16);
  for (IoTicket t : tickets) ASSERT_TRUE(io->Wait(t).ok());
}

TEST_F(AsyncIoTest, TicketsAreWaitedOnce) {
  auto io = NewIo();
  auto file = io->OpenFile(dir_, "once", kIoAlignment);
  ASSERT_TRUE(file.ok());
  AlignedBuffer b = Buffer(kIoAlignment);
  auto t = io->Write(*file, 0, b.data(), kIoAlignment);
  ASSERT_TRUE(io->Wait(*t).ok());
  EXPECT_TRUE(io->Poll(*t));
  absl::Status again = io->Wait(*t);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(again.message(), HasSubstr("already waited"));
  EXPECT_EQ(io->Wait(12345).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AsyncIoTest, DirectOnTheTestDirectory) {
  auto io = NewIo();
  auto file = io->OpenFile(dir_, "direct", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  auto info = InspectFilesystem(dir_);
  ASSERT_TRUE(info.ok());
  // ext4 under Bazel here; every disk filesystem we target takes O_DIRECT.
  EXPECT_TRUE(io->direct(*file)) << "filesystem " << info->type;
}

TEST_F(AsyncIoTest, AlwaysBufferedWhenAsked) {
  AsyncIoOptions options;
  options.direct = false;
  auto io = AsyncIo::Create(options);
  ASSERT_TRUE(io.ok());
  auto file = (*io)->OpenFile(dir_, "buffered", 10000);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE((*io)->direct(*file));
  EXPECT_EQ((*io)->file_bytes(*file), 12288);
  // Buffered: any offset, length and address.
  std::vector<char> out(1000, 'x'), in(1000);
  ASSERT_TRUE((*io)->Write(*file, 7, out.data(), 1000).ok());
  ASSERT_TRUE((*io)->Read(*file, 7, in.data(), 1000).ok());
  ASSERT_TRUE((*io)->WaitAll().ok());
  EXPECT_EQ(out, in);
}

TEST_F(AsyncIoTest, FilesLeaveNoEntry) {
  auto io = NewIo();
  ASSERT_TRUE(io->OpenFile(dir_, "tmpfile", 1 << 20).ok());
  EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty());
  // The named-file path (filesystems without O_TMPFILE): unlinked at once.
  auto named = offload_internal::CreateOffloadFile(dir_, "named", 1 << 20, true, /*allow_tmpfile=*/false);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty());
  EXPECT_TRUE(named->leftover_path.empty());
  ::close(named->fd);
}

TEST_F(AsyncIoTest, KilledProcessLeavesNothing) {
  for (bool allow_tmpfile : {true, false}) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto f = offload_internal::CreateOffloadFile(dir_, "child", 1 << 20, true, allow_tmpfile);
      const char c = f.ok() ? 'y' : 'n';
      (void)!::write(ready[1], &c, 1);
      ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    ::kill(child, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
    EXPECT_EQ(c, 'y');
    EXPECT_TRUE(WIFSIGNALED(wstatus));
    EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty()) << "allow_tmpfile " << allow_tmpfile;
  }
}

TEST_F(AsyncIoTest, StaleFilesOfDeadProcessesAreRemoved) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // a pid that is now dead
  const std::string stale = absl::StrCat(dir_, "/zeroshard-offload-", child, "-0");
  const std::string live = absl::StrCat(dir_, "/zeroshard-offload-", ::getppid(), "-0");
  const std::string other = dir_ + "/unrelated";
  for (const std::string& p : {stale, live, other}) {
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << p;
    ::close(fd);
  }
  auto io = NewIo();
  ASSERT_TRUE(io->OpenFile(dir_, "after crash", 1 << 20).ok());
  EXPECT_THAT(DirEntries(dir_), ::testing::UnorderedElementsAre(
                                    absl::StrCat("zeroshard-offload-", ::getppid(), "-0"), "unrelated"));
}

TEST_F(AsyncIoTest, TruncatedFileReadIsDataLoss) {
  auto io = NewIo();
  constexpr int64_t kBytes = 64 << 10;
  auto file = io->OpenFile(dir_, "rank 1 optimizer_state", kBytes);
  ASSERT_TRUE(file.ok());
  AlignedBuffer b = Buffer(kBytes);
  Fill(b, 9);
  ASSERT_TRUE(io->Wait(*io->Write(*file, 0, b.data(), kBytes)).ok());
  // Someone else truncates it, through the /proc/self/fd link to our file.
  const std::string target = io->file_path(*file);
  std::string proc_link;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string() == target) proc_link = e.path().string();
  }
  ASSERT_FALSE(proc_link.empty()) << target;
  ASSERT_EQ(::truncate(proc_link.c_str(), 0), 0) << std::strerror(errno);
  auto r = io->Read(*file, 8192, b.data(), 8192);
  ASSERT_TRUE(r.ok());
  absl::Status s = io->Wait(*r);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("rank 1 optimizer_state"));
  EXPECT_THAT(s.message(), HasSubstr("at offset 8192"));
  EXPECT_THAT(s.message(), HasSubstr("file truncated?"));
}

TEST_F(AsyncIoTest, ShortReadContinuesThenStopsAtTheEnd) {
  auto io = NewIo();
  constexpr int64_t kBytes = 64 << 10;
  auto file = io->OpenFile(dir_, "short", kBytes);
  ASSERT_TRUE(file.ok());
  AlignedBuffer out = Buffer(kBytes), in = Buffer(kBytes);
  Fill(out, 3);
  ASSERT_TRUE(io->Wait(*io->Write(*file, 0, out.data(), kBytes)).ok());
  std::string proc_link;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string() == io->file_path(*file)) {
      proc_link = e.path().string();
    }
  }
  ASSERT_EQ(::truncate(proc_link.c_str(), 12288), 0) << std::strerror(errno);
  // 4096 bytes come back short, the other 12288 are resubmitted and find
  // the end.
  absl::Status s = io->Wait(*io->Read(*file, 8192, in.data(), 16384));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("read of 12288 bytes at offset 12288 returned 0")) << s;
  EXPECT_EQ(std::memcmp(in.data(), static_cast<char*>(out.data()) + 8192, 4096), 0);
  EXPECT_EQ(io->stats().read_bytes, 0);  // failed requests count nothing
}

TEST_F(AsyncIoTest, MisalignedAndOutOfRangeRequests) {
  auto io = NewIo();
  auto file = io->OpenFile(dir_, "checked", 1 << 20);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(io->direct(*file));
  AlignedBuffer b = Buffer(2 * kIoAlignment);
  char* p = static_cast<char*>(b.data());
  auto offset = io->Read(*file, 100, p, kIoAlignment);
  EXPECT_EQ(offset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(offset.status().message(), HasSubstr("offset 100 is not a multiple of 4096"));
  auto length = io->Write(*file, 0, p, 1000);
  EXPECT_EQ(length.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(length.status().message(), HasSubstr("length 1000 is not a multiple of 4096"));
  auto address = io->Read(*file, 0, p + 512, kIoAlignment);
  EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(address.status().message(), HasSubstr("is not aligned to 4096"));
  auto range = io->Read(*file, 1 << 20, p, kIoAlignment);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(range.status().message(), HasSubstr("checked: offset 1048576 length 4096 is outside the file's 1048576"));
  EXPECT_EQ(io->Read(*file, -4096, p, kIoAlignment).status().code(), absl::StatusCode::kOutOfRange);
  auto index = io->Read(3, 0, p, kIoAlignment);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(index.status().message(), HasSubstr("file index 3"));
  EXPECT_EQ(io->in_flight(), 0);
}

// InjectIoFaultForTesting: the armed request fails with its errno as a real
// failure would, moves no data, and the requests around it are unaffected.
TEST_F(AsyncIoTest, InjectedReadErrorFailsThatReadAlone) {
  auto io = NewIo(4);
  constexpr int64_t kBlock = 64 << 10;
  auto file = io->OpenFile(dir_, "rank 1 optimizer_state", 3 * kBlock);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer out = Buffer(3 * kBlock);
  Fill(out, 5);
  ASSERT_TRUE(io->Write(*file, 0, out.data(), 3 * kBlock).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  ASSERT_TRUE(InjectIoFaultForTesting(*io, {/*write=*/false, /*nth=*/2, EIO}).ok());
  io->ResetStats();
  AlignedBuffer in = Buffer(3 * kBlock);
  std::vector<IoTicket> t;
  for (int i = 0; i < 3; ++i) {
    auto ticket = io->Read(*file, i * kBlock, static_cast<char*>(in.data()) + i * kBlock, kBlock);
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    t.push_back(*ticket);
  }
  EXPECT_TRUE(io->Wait(t[0]).ok());
  const absl::Status failed = io->Wait(t[1]);
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal) << failed;
  EXPECT_EQ(failed.message(), absl::StrCat("offload file rank 1 optimizer_state (", io->file_path(*file),
                                           "): read of 65536 bytes at offset 65536: Input/output error"));
  EXPECT_TRUE(io->Wait(t[2]).ok());
  const auto* o = static_cast<const char*>(out.data());
  const auto* i = static_cast<const char*>(in.data());
  EXPECT_EQ(std::memcmp(o, i, kBlock), 0);
  EXPECT_EQ(std::memcmp(o + 2 * kBlock, i + 2 * kBlock, kBlock), 0);
  std::vector<char> zeros(kBlock, 0);
  EXPECT_EQ(std::memcmp(i + kBlock, zeros.data(), kBlock), 0) << "the failed read moved data";
  EXPECT_EQ(io->stats().reads, 2);
  EXPECT_EQ(io->stats().read_bytes, 2 * kBlock);
  // The fault is spent: the same read now succeeds.
  auto again = io->Read(*file, kBlock, static_cast<char*>(in.data()) + kBlock, kBlock);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(io->Wait(*again).ok());
  EXPECT_EQ(std::memcmp(o + kBlock, i + kBlock, kBlock), 0);
}

TEST_F(AsyncIoTest, InjectedNoSpaceOnAWriteIsResourceExhaustedAndWritesNothing) {
  auto io = NewIo();
  auto file = io->OpenFile(dir_, "rank 0 master_weights", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer out = Buffer(8192);
  Fill(out, 9);
  // Reads do not count towards a write fault.
  AlignedBuffer in = Buffer(8192);
  ASSERT_TRUE(InjectIoFaultForTesting(*io, {/*write=*/true, /*nth=*/1, ENOSPC}).ok());
  ASSERT_TRUE(io->Read(*file, 0, in.data(), 8192).ok());
  auto w = io->Write(*file, 4096, out.data(), 8192);
  ASSERT_TRUE(w.ok());
  const absl::Status s = io->WaitAll();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("offload file rank 0 master_weights ("));
  EXPECT_THAT(s.message(), HasSubstr("): write of 8192 bytes at offset 4096: No space left on device"));
  ASSERT_TRUE(io->Read(*file, 4096, in.data(), 8192).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  std::vector<char> zeros(8192, 0);
  EXPECT_EQ(std::memcmp(in.data(), zeros.data(), 8192), 0) << "the failed write reached the file";
  EXPECT_EQ(io->stats().writes, 0);
}

TEST(AsyncIoFaultTest, BadFaultsAreRefusedNamingTheValue) {
  auto io = NewIo();
  absl::Status s = InjectIoFaultForTesting(*io, {false, 0, EIO});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "InjectIoFaultForTesting: nth 0, want >= 1");
  s = InjectIoFaultForTesting(*io, {false, 1, EAGAIN});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("InjectIoFaultForTesting: error ", EAGAIN,
                                      ", want a failure errno (> 0, not EAGAIN or EINTR)"));
  EXPECT_EQ(InjectIoFaultForTesting(*io, {false, 1, 0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(AsyncIoCreateTest, QueueDepthOutOfRange) {
  for (int depth : {0, 257, -1}) {
    AsyncIoOptions options;
    options.queue_depth = depth;
    auto io = AsyncIo::Create(options);
    EXPECT_EQ(io.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(io.status().message(), HasSubstr(absl::StrCat("queue_depth ", depth, " is outside [1, 256]")));
  }
  AsyncIoOptions options;
  options.queue_depth = 256;
  EXPECT_TRUE(AsyncIo::Create(options).ok());
}

TEST(AsyncIoOpenTest, MissingOrUnwritableDirectory) {
  auto io = NewIo();
  auto missing = io->OpenFile("/nonexistent/offload", "x", 4096);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/offload"));
  // /proc is a directory nobody may create files in, root included.
  auto unwritable = io->OpenFile("/proc", "x", 4096);
  EXPECT_EQ(unwritable.status().code(), absl::StatusCode::kFailedPrecondition) << unwritable.status();
  EXPECT_THAT(unwritable.status().message(), HasSubstr("'/proc'"));
}

TEST(AlignedBufferTest, AlignedZeroedAndCounted) {
  MemoryTracker tracker;
  {
    auto b = AlignedBuffer::Allocate(5000, &tracker, MemoryCategory::kOffloadStaging);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->bytes(), 8192);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kIoAlignment, 0u);
    EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, 8192);
    const auto* p = static_cast<const uint8_t*>(b->data());
    EXPECT_TRUE(std::all_of(p, p + 8192, [](uint8_t x) { return x == 0; }));
    AlignedBuffer moved = std::move(b).value();
    EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, 8192);
  }
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, 0);
  tracker.SetLimit(MemoryCategory::kOffloadStaging, 4096);
  auto over = AlignedBuffer::Allocate(4097, &tracker, MemoryCategory::kOffloadStaging);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tracker.Usage(MemoryCategory::kOffloadStaging).current, 0);
}

TEST(InspectFilesystemTest, DevShmIsTmpfs) {
  auto info = InspectFilesystem("/dev/shm");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->type, "tmpfs");
  EXPECT_TRUE(info->ram_backed);
  EXPECT_TRUE(info->writable);
  EXPECT_GT(info->available_bytes, 0);
}

TEST(InspectFilesystemTest, TestDirectoryIsDisk) {
  auto info = InspectFilesystem(TestTmpRoot());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->ram_backed) << info->type;
  EXPECT_TRUE(info->writable);
  EXPECT_GT(info->available_bytes, 0);
  EXPECT_EQ(InspectFilesystem("/nonexistent").status().code(), absl::StatusCode::kFailedPrecondition);
}

// A filesystem mounted on a fresh directory for one test (root only: the
// test skips, saying why, elsewhere); unmounted in every path.
class MountedTest : public ::testing::Test {
 protected:
  void Mount(const char* type, const char* data) {
    dir_ = MakeTempDir();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount " << type;
    if (::mount("none", dir_.c_str(), type, 0, data) != 0) {
      GTEST_SKIP() << "mount -t " << type << " failed: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) {
      EXPECT_EQ(::umount2(dir_.c_str(), MNT_DETACH), 0) << std::strerror(errno);
    }
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  std::string dir_;
  bool mounted_ = false;
};

TEST_F(MountedTest, RamfsFallsBackToBufferedWithOneWarning) {
  Mount("ramfs", nullptr);
  if (IsSkipped()) return;
  auto io = NewIo();
  ::testing::internal::CaptureStderr();
  auto a = io->OpenFile(dir_, "ramfs a", 1 << 20);
  auto b = io->OpenFile(dir_, "ramfs b", 1 << 20);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(io->direct(*a));
  EXPECT_FALSE(io->direct(*b));
  EXPECT_EQ(err, absl::StrCat("zeroshard: warning: ", dir_, " refuses O_DIRECT (ramfs); offload I/O is buffered\n"));
  EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty());
  // The named path on ramfs: the refused O_DIRECT leaves no name either.
  auto named = offload_internal::CreateOffloadFile(dir_, "named", 1 << 20, true, /*allow_tmpfile=*/false);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_FALSE(named->direct);
  EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty());
  ::close(named->fd);
  std::string out(10000, 'r'), in(10000, 0);
  ASSERT_TRUE(io->Write(*a, 123, out.data(), out.size()).ok());
  ASSERT_TRUE(io->Read(*a, 123, in.data(), in.size()).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  EXPECT_EQ(out, in);
  auto info = InspectFilesystem(dir_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->type, "ramfs");
  EXPECT_TRUE(info->ram_backed);
}

TEST_F(MountedTest, FullTmpfsIsResourceExhausted) {
  Mount("tmpfs", "size=1m");
  if (IsSkipped()) return;
  auto io = NewIo();
  auto file = io->OpenFile(dir_, "too big", 4 << 20);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(dir_));
  EXPECT_THAT(file.status().message(), HasSubstr("4194304 bytes"));
  EXPECT_THAT(file.status().message(), HasSubstr("1048576 bytes available"));
  // What fits still does, and the failed one left nothing behind.
  EXPECT_TRUE(io->OpenFile(dir_, "fits", 512 << 10).ok());
  EXPECT_THAT(DirEntries(dir_), ::testing::IsEmpty());
}

// A real full disk met by a write, not at OpenFile: ext2 has no fallocate,
// so the file is sized with ftruncate and its blocks come with the writes.
TEST(LoopFilesystemTest, FullExt2IsResourceExhaustedOnTheWriteThatNeedsSpace) {
  auto fs = LoopFilesystem::Mount("ext2", 8, "/tmp");
  if (!fs.ok()) GTEST_SKIP() << fs.status().message();
  const std::string dir = (*fs)->dir();
  auto io = NewIo();
  auto file = io->OpenFile(dir, "rank 0 optimizer_state", 1 << 20);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(io->direct(*file));
  AlignedBuffer out = Buffer(1 << 20);
  Fill(out, 3);
  // What was written before the disk filled stays readable.
  ASSERT_TRUE(io->Write(*file, 0, out.data(), 64 << 10).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  auto filled = (*fs)->Fill();
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_GT(*filled, 4 << 20);
  auto info = InspectFilesystem(dir);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->available_bytes, 0);
  ASSERT_TRUE(io->Write(*file, 512 << 10, static_cast<char*>(out.data()) + (512 << 10), 512 << 10).ok());
  const absl::Status s = io->WaitAll();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("offload file rank 0 optimizer_state ("));
  EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
  AlignedBuffer in = Buffer(64 << 10);
  ASSERT_TRUE(io->Read(*file, 0, in.data(), 64 << 10).ok());
  ASSERT_TRUE(io->WaitAll().ok());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), 64 << 10), 0);
}

}  // namespace
}  // namespace zeroshard
