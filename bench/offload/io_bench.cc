// Offload I/O benchmark: read and write bandwidth of AsyncIo (io_uring,
// O_DIRECT) over block size x queue depth on one --file_mib file in --dir,
// beside the raw sequential O_DIRECT figure at queue depth 1 with
// pread/pwrite (no io_uring) and, when fio is installed, fio's io_uring
// figure at the deepest queue. Each cell is the median of --repeats passes
// over the whole file; GB/s = 1e9 bytes per second.
//
//   bazel run -c opt //bench/offload:io_bench -- --dir /var/tmp --file_mib 512
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "offload/async_io.h"

ABSL_FLAG(std::string, dir, "/var/tmp", "directory of the benchmark file (its filesystem is measured)");
ABSL_FLAG(int64_t, file_mib, 1024, "file size in MiB; every pass moves all of it");
ABSL_FLAG(int, repeats, 3, "passes per cell; the median is reported");
ABSL_FLAG(std::string, block_kib, "64,256,1024,4096,16384", "block sizes in KiB");
ABSL_FLAG(std::string, depths, "1,2,4,8,16,32", "queue depths");
ABSL_FLAG(bool, fio, true, "also run fio (io_uring, direct) when it is installed");

namespace zeroshard {
namespace {

using Clock = std::chrono::steady_clock;

void CheckOrExit(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "io_bench: %s: %s\n", what, std::string(s.message()).c_str());
    std::exit(1);
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      std::fprintf(stderr, "io_bench: bad list entry '%s' in '%s'\n", std::string(part).c_str(), s.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

// One pass over the file with `block`-byte requests, `depth` of them kept in
// flight (a slot of the buffer each); GB/s.
double AsyncPass(AsyncIo& io, int file, bool write, int64_t block, int depth, AlignedBuffer& buffer) {
  const int64_t blocks = io.file_bytes(file) / block;
  std::vector<IoTicket> slots(depth, -1);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < blocks; ++i) {
    const int slot = static_cast<int>(i % depth);
    if (slots[slot] >= 0) CheckOrExit(io.Wait(slots[slot]), "Wait");
    char* p = static_cast<char*>(buffer.data()) + slot * block;
    auto t = write ? io.Write(file, i * block, p, block) : io.Read(file, i * block, p, block);
    CheckOrExit(t.status(), write ? "Write" : "Read");
    slots[slot] = *t;
  }
  CheckOrExit(io.WaitAll(), "WaitAll");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(blocks * block) / s / 1e9;
}

// Sequential pread/pwrite on an O_DIRECT file of its own: the synchronous
// baseline at queue depth 1.
double RawPass(int fd, int64_t file_bytes, bool write, int64_t block, AlignedBuffer& buffer) {
  const int64_t blocks = file_bytes / block;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < blocks; ++i) {
    int64_t done = 0;
    while (done < block) {
      char* p = static_cast<char*>(buffer.data()) + done;
      const ssize_t n = write ? ::pwrite(fd, p, block - done, i * block + done)
                              : ::pread(fd, p, block - done, i * block + done);
      if (n <= 0) {
        std::fprintf(stderr, "io_bench: raw %s: %s\n", write ? "pwrite" : "pread", n < 0 ? std::strerror(errno) : "EOF");
        std::exit(1);
      }
      done += n;
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<double>(blocks * block) / s / 1e9;
}

// fio's bandwidth in GB/s (0 when fio is missing or fails).
double FioPass(const std::string& dir, int64_t file_mib, bool write, int64_t block, int depth) {
  const std::string file = absl::StrCat(dir, "/zeroshard-io-bench-fio");
  const std::string cmd = absl::StrCat(
      "fio --name=zs --filename=", file, " --size=", file_mib, "M --bs=", block, " --iodepth=", depth,
      " --ioengine=io_uring --direct=1 --rw=", write ? "write" : "read",
      " --output-format=terse --terse-version=3 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  ::pclose(p);
  // Terse v3: field 6 (0-based) is the read bandwidth in KiB/s, 47 the write.
  std::vector<std::string> fields = absl::StrSplit(out, ';');
  const size_t index = write ? 47 : 6;
  double kib_s = 0;
  if (fields.size() <= index || !absl::SimpleAtod(fields[index], &kib_s)) return 0;
  return kib_s * 1024 / 1e9;
}

bool HaveFio() { return std::system("fio --version >/dev/null 2>&1") == 0; }

std::string BlockName(int64_t bytes) {
  return bytes >= (1 << 20) ? absl::StrCat(bytes >> 20, " MiB") : absl::StrCat(bytes >> 10, " KiB");
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t file_bytes = absl::GetFlag(FLAGS_file_mib) << 20;
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<int64_t> blocks = ParseList(absl::GetFlag(FLAGS_block_kib));
  for (int64_t& b : blocks) b <<= 10;
  const std::vector<int64_t> depths = ParseList(absl::GetFlag(FLAGS_depths));
  const int64_t max_block = *std::max_element(blocks.begin(), blocks.end());
  const int max_depth = static_cast<int>(*std::max_element(depths.begin(), depths.end()));
  const bool fio = absl::GetFlag(FLAGS_fio) && HaveFio();

  auto info = InspectFilesystem(dir);
  CheckOrExit(info.status(), "InspectFilesystem");
  auto buffer = AlignedBuffer::Allocate(max_block * max_depth, nullptr, MemoryCategory::kOffloadStaging);
  CheckOrExit(buffer.status(), "AlignedBuffer");

  // results[op][block][depth index]
  std::vector<std::vector<std::vector<double>>> results(2, std::vector<std::vector<double>>(blocks.size()));
  bool direct = true;
  for (size_t d = 0; d < depths.size(); ++d) {
    AsyncIoOptions options;
    options.queue_depth = static_cast<int>(depths[d]);
    auto io = AsyncIo::Create(options);
    CheckOrExit(io.status(), "AsyncIo::Create");
    auto file = (*io)->OpenFile(dir, "io_bench", file_bytes);
    CheckOrExit(file.status(), "OpenFile");
    direct = direct && (*io)->direct(*file);
    for (size_t b = 0; b < blocks.size(); ++b) {
      for (int op = 0; op < 2; ++op) {  // write first: reads then see written blocks
        std::vector<double> runs;
        for (int r = 0; r < repeats; ++r) {
          runs.push_back(AsyncPass(**io, *file, op == 0, blocks[b], options.queue_depth, *buffer));
        }
        results[op][b].push_back(Median(runs));
      }
    }
  }

  // The raw baseline's own O_DIRECT file, gone with its descriptor.
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_DIRECT, 0600);
  if (fd < 0 || ::fallocate(fd, 0, 0, file_bytes) != 0) {
    std::fprintf(stderr, "io_bench: raw O_DIRECT file in %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  std::vector<std::vector<double>> raw(2), fio_bw(2);
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (int op = 0; op < 2; ++op) {
      std::vector<double> runs, fio_runs;
      for (int r = 0; r < repeats; ++r) {
        runs.push_back(RawPass(fd, file_bytes, op == 0, blocks[b], *buffer));
        if (fio) fio_runs.push_back(FioPass(dir, file_bytes >> 20, op == 0, blocks[b], max_depth));
      }
      raw[op].push_back(Median(runs));
      fio_bw[op].push_back(Median(fio_runs));
    }
  }
  ::close(fd);
  if (fio) ::unlink(absl::StrCat(dir, "/zeroshard-io-bench-fio").c_str());

  std::printf("dir %s (%s, %s), file %lld MiB, median of %d\n\n", dir.c_str(), info->type.c_str(),
              direct ? "O_DIRECT" : "buffered", static_cast<long long>(file_bytes >> 20), repeats);
  for (int op = 0; op < 2; ++op) {
    std::printf("%s, GB/s\n\n| block |", op == 0 ? "write" : "read");
    for (int64_t d : depths) std::printf(" qd %lld |", static_cast<long long>(d));
    std::printf(" raw %s qd 1 |", op == 0 ? "pwrite" : "pread");
    if (fio) std::printf(" fio qd %d |", max_depth);
    std::printf("\n|---|");
    for (size_t i = 0; i < depths.size() + 1 + (fio ? 1 : 0); ++i) std::printf("---|");
    std::printf("\n");
    for (size_t b = 0; b < blocks.size(); ++b) {
      std::printf("| %s |", BlockName(blocks[b]).c_str());
      for (double v : results[op][b]) std::printf(" %.2f |", v);
      std::printf(" %.2f |", raw[op][b]);
      if (fio) std::printf(" %.2f |", fio_bw[op][b]);
      std::printf("\n");
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Main(argc, argv); }
