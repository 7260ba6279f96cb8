// One conformance suite for every Communicator backend (MPI, NCCL), run under
// mpirun at world sizes 1-4.
//
// Data: every element is a small integer in [-8, 8], drawn from a hash of
// (seed, rank, index) so each rank can regenerate every other rank's input.
// The seed is fresh per run (printed on failure). Sums of at most 4 such
// values are exact in bf16, f16, f32 and i32, so sum and max must match
// bit for bit. avg = sum / size is not exact; it must satisfy
//   |got - sum/size| <= size · ε · (|sum/size| + 8),   ε = 2^-23 (f32),
// 2^-10 (f16), 2^-7 (bf16); i32 avg truncates toward zero exactly.
// Outputs are poisoned (bytes 0x7f: NaN or ~3e38 or 2139062143, 127 in i8)
// so unwritten elements fail.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/staged_communicator.h"
#include "core/device.h"
#include "core/memory_tracker.h"
#include "core/dtype.h"
#include "core/testing/test_seed.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using CreateFn = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(const CommOptions&)>;

struct Backend {
  std::string name;
  CreateFn create;
};

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};
constexpr int64_t kSmallCounts[] = {1, 7, 1001};
constexpr int64_t kLargeCount = (int64_t{1} << 22) + 3;  // ~4 Mi elements, odd
// AllToAll moves bytes, so every dtype whose values hold [-8, 8].
constexpr DType kAllToAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI8};
constexpr int64_t kAllToAllCounts[] = {0, 1, 7, 1001};

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s input element i of stream `salt`: an integer in [-8, 8].
int Value(uint64_t seed, int rank, int64_t i, int salt) {
  return static_cast<int>(SplitMix(seed ^ SplitMix((uint64_t(rank) << 40) ^ (uint64_t(salt) << 56) ^ i)) % 17) - 8;
}

void Store(void* base, int64_t i, DType dtype, double v) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(base)[i] = F32ToF16(static_cast<float>(v));
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(base)[i] = F32ToBF16(static_cast<float>(v));
      break;
    case DType::kI32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DType::kU16:
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v);
      break;
    case DType::kI8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
  }
}

double Load(const void* base, int64_t i, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[i];
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kBF16:
      return BF16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kI32:
      return static_cast<const int32_t*>(base)[i];
    case DType::kU16:
      return static_cast<const uint16_t*>(base)[i];
    case DType::kI8:
      return static_cast<const int8_t*>(base)[i];
  }
  return 0;
}

double Epsilon(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return std::ldexp(1.0, -10);
    case DType::kBF16:
      return std::ldexp(1.0, -7);
    case DType::kF32:
      return std::ldexp(1.0, -23);
    default:
      return 0;
  }
}

// Host bytes plus, for a device backend, a device copy.
class Staged {
 public:
  Staged(Device device, DType dtype, int64_t n)
      : device_(device), dtype_(dtype), n_(n), host_(n * DTypeSize(dtype) + 1, 0x7f) {
    if (device_ != Device::kCpu) {
      auto p = DeviceAlloc(device_, bytes());
      EXPECT_TRUE(p.ok()) << p.status();
      dev_ = p.ok() ? *p : nullptr;
    }
    Upload();
  }
  ~Staged() {
    if (device_ != Device::kCpu) DeviceFree(device_, dev_);
  }
  size_t bytes() const { return n_ * DTypeSize(dtype_); }
  void* data() { return device_ == Device::kCpu ? host_.data() : dev_; }
  void* host() { return host_.data(); }
  void Set(int64_t i, double v) { Store(host_.data(), i, dtype_, v); }
  double Get(int64_t i) const { return Load(host_.data(), i, dtype_); }
  void Upload() {
    if (device_ != Device::kCpu) {
      EXPECT_TRUE(DeviceCopy(dev_, device_, host_.data(), Device::kCpu, bytes()).ok());
    }
  }
  void Download() {
    if (device_ != Device::kCpu) {
      EXPECT_TRUE(DeviceCopy(host_.data(), Device::kCpu, dev_, device_, bytes()).ok());
    }
  }

 private:
  Device device_;
  DType dtype_;
  int64_t n_;
  std::vector<uint8_t> host_;
  void* dev_ = nullptr;
};

class CommConformanceTest : public testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    comm_ = Create(CommOptions{});
    if (comm_ == nullptr) return;
    // The test's seed, rank 0's on every rank, traced in every failure
    // message of the test.
    seed_ = TestSeed();
    MPI_Bcast(&seed_, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    RecordProperty("seed", std::to_string(seed_));
    seed_trace_.emplace(__FILE__, __LINE__, ::testing::Message() << "seed " << seed_);
  }

  // nullptr (after GTEST_SKIP) when the backend is unavailable here.
  std::unique_ptr<Communicator> Create(CommOptions options) {
    options.timeout = absl::Seconds(60);  // a hung test aborts instead of hanging
    auto c = GetParam().create(options);
    if (c.status().code() == absl::StatusCode::kUnavailable) {
      skip_reason_ = std::string(c.status().message());
      return nullptr;
    }
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  Device device() const { return comm_->device(); }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }

  // Fills `buf` with rank `r`'s stream-`salt` values at positions [0, n).
  void Fill(Staged& buf, int r, int64_t n, int salt, int64_t offset = 0) {
    for (int64_t i = 0; i < n; ++i) buf.Set(i, Value(seed_, r, offset + i, salt));
    buf.Upload();
  }

  // The exact reduction of element i over ranks (before rounding to dtype).
  double Reduce(ReduceOp op, DType dtype, int64_t i, int salt) {
    double acc = op == ReduceOp::kMax ? -1e30 : 0;
    for (int r = 0; r < size(); ++r) {
      const double v = Value(seed_, r, i, salt);
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    if (op == ReduceOp::kAvg) {
      if (dtype == DType::kI32) return static_cast<double>(static_cast<int64_t>(acc) / size());
      return acc / size();
    }
    return acc;
  }

  // Checks got[i] against the reduction; returns the number of bad elements
  // (the first few are reported).
  int CheckReduced(Staged& got, int64_t n, ReduceOp op, DType dtype, int salt, int64_t offset) {
    got.Download();
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = Reduce(op, dtype, offset + i, salt);
      const double have = got.Get(i);
      const bool ok = op == ReduceOp::kAvg && dtype != DType::kI32
                          ? std::fabs(have - want) <= size() * Epsilon(dtype) * (std::fabs(want) + 8)
                          : have == want;
      if (!ok && bad++ < 3) {
        ADD_FAILURE() << GetParam().name << " rank " << rank() << " element " << i << ": got " << have
                      << ", want " << want << " (seed " << seed_ << ")";
      }
    }
    return bad;
  }

  void RunAllReduce(DType dtype, ReduceOp op, int64_t n) {
    SCOPED_TRACE(absl::StrCat("AllReduce ", DTypeName(dtype), " ", ReduceOpName(op), " count ", n));
    Staged buf(device(), dtype, n);
    Fill(buf, rank(), n, 1);
    ASSERT_TRUE(comm_->AllReduce(buf.data(), n, dtype, op)->Wait().ok());
    EXPECT_EQ(CheckReduced(buf, n, op, dtype, 1, 0), 0);
  }

  void RunReduceScatter(DType dtype, ReduceOp op, int64_t n) {
    SCOPED_TRACE(absl::StrCat("ReduceScatter ", DTypeName(dtype), " ", ReduceOpName(op), " count ", n));
    Staged in(device(), dtype, n * size());
    Staged out(device(), dtype, n);
    Fill(in, rank(), n * size(), 2);
    ASSERT_TRUE(comm_->ReduceScatter(in.data(), out.data(), n, dtype, op)->Wait().ok());
    EXPECT_EQ(CheckReduced(out, n, op, dtype, 2, rank() * n), 0);
  }

  void RunAllGather(DType dtype, int64_t n) {
    SCOPED_TRACE(absl::StrCat("AllGather ", DTypeName(dtype), " count ", n));
    Staged in(device(), dtype, n);
    Staged out(device(), dtype, n * size());
    Fill(in, rank(), n, 3);
    ASSERT_TRUE(comm_->AllGather(in.data(), out.data(), n, dtype)->Wait().ok());
    out.Download();
    int bad = 0;
    for (int r = 0; r < size(); ++r) {
      for (int64_t i = 0; i < n; ++i) {
        if (out.Get(r * n + i) != Value(seed_, r, i, 3) && bad++ < 3) {
          ADD_FAILURE() << "slot of rank " << r << " element " << i << ": got " << out.Get(r * n + i);
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }

  void RunBroadcast(DType dtype, int64_t n, int root) {
    SCOPED_TRACE(absl::StrCat("Broadcast ", DTypeName(dtype), " count ", n, " root ", root));
    Staged buf(device(), dtype, n);
    if (rank() == root) Fill(buf, root, n, 4);  // others keep the poison
    ASSERT_TRUE(comm_->Broadcast(buf.data(), n, dtype, root)->Wait().ok());
    buf.Download();
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (buf.Get(i) != Value(seed_, root, i, 4) && bad++ < 3) ADD_FAILURE() << "element " << i;
    }
    EXPECT_EQ(bad, 0);
  }

  // Rank r's input element j is Value(seed, r, j, salt); afterwards
  // out[r*n + i] must be rank r's element rank()*n + i.
  void RunAllToAll(DType dtype, int64_t n, int salt = 7) {
    SCOPED_TRACE(absl::StrCat("AllToAll ", DTypeName(dtype), " count ", n));
    Staged in(device(), dtype, n * size());
    Staged out(device(), dtype, n * size());
    Fill(in, rank(), n * size(), salt);
    ASSERT_TRUE(comm_->AllToAll(in.data(), out.data(), n, dtype)->Wait().ok());
    out.Download();
    int bad = 0;
    for (int r = 0; r < size(); ++r) {
      for (int64_t i = 0; i < n; ++i) {
        const double want = Value(seed_, r, rank() * n + i, salt);
        if (out.Get(r * n + i) != want && bad++ < 3) {
          ADD_FAILURE() << "block from rank " << r << " element " << i << ": got " << out.Get(r * n + i)
                        << ", want " << want << " (seed " << seed_ << ")";
        }
      }
    }
    EXPECT_EQ(bad, 0);
    // Nothing is written past the n·size() elements (the staging byte after them).
    EXPECT_EQ(static_cast<const uint8_t*>(out.host())[out.bytes()], 0x7f);
  }

  std::unique_ptr<Communicator> comm_;
  std::string skip_reason_;
  uint64_t seed_ = 0;
  std::optional<::testing::ScopedTrace> seed_trace_;
};

#define SKIP_IF_UNAVAILABLE()                         \
  if (comm_ == nullptr) {                             \
    GTEST_SKIP() << GetParam().name << ": " << skip_reason_; \
  }

TEST_P(CommConformanceTest, ReportsRankSizeNameDevice) {
  SKIP_IF_UNAVAILABLE();
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(rank(), world_rank);
  EXPECT_EQ(size(), world_size);
  EXPECT_EQ(comm_->name(), "world");
  const bool on_gpu = GetParam().name == "nccl" || (GetParam().name == "mpi_staged" && CudaAvailable());
  EXPECT_EQ(device(), on_gpu ? Device::kCuda : Device::kCpu);
}

TEST_P(CommConformanceTest, AllReduceEveryDTypeOpAndCount) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : kDTypes) {
    for (ReduceOp op : kOps) {
      for (int64_t n : kSmallCounts) RunAllReduce(dtype, op, n);
    }
  }
}

TEST_P(CommConformanceTest, AllReduceLarge) {
  SKIP_IF_UNAVAILABLE();
  RunAllReduce(DType::kF32, ReduceOp::kSum, kLargeCount);
  RunAllReduce(DType::kBF16, ReduceOp::kAvg, kLargeCount);
}

TEST_P(CommConformanceTest, ReduceScatterEveryDTypeOpAndCount) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : kDTypes) {
    for (ReduceOp op : kOps) {
      for (int64_t n : kSmallCounts) RunReduceScatter(dtype, op, n);
    }
  }
}

TEST_P(CommConformanceTest, ReduceScatterLarge) {
  SKIP_IF_UNAVAILABLE();
  // ~4 Mi elements in the input buffer (the gathered/scattered whole).
  RunReduceScatter(DType::kF32, ReduceOp::kSum, kLargeCount / size());
}

TEST_P(CommConformanceTest, AllGatherEveryDTypeAndCount) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : kDTypes) {
    for (int64_t n : kSmallCounts) RunAllGather(dtype, n);
  }
}

TEST_P(CommConformanceTest, AllGatherLarge) {
  SKIP_IF_UNAVAILABLE();
  RunAllGather(DType::kBF16, kLargeCount / size());
}

TEST_P(CommConformanceTest, AllGatherInPlace) {
  SKIP_IF_UNAVAILABLE();
  const int64_t n = 5;
  Staged out(device(), DType::kF32, n * size());
  for (int64_t i = 0; i < n; ++i) out.Set(rank() * n + i, Value(seed_, rank(), i, 5));
  out.Upload();
  char* mine = static_cast<char*>(out.data()) + rank() * n * sizeof(float);
  ASSERT_TRUE(comm_->AllGather(mine, out.data(), n, DType::kF32)->Wait().ok());
  out.Download();
  for (int r = 0; r < size(); ++r) {
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.Get(r * n + i), Value(seed_, r, i, 5)) << r << " " << i;
  }
}

TEST_P(CommConformanceTest, BroadcastEveryDTypeCountAndRoot) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : kDTypes) {
    for (int64_t n : kSmallCounts) {
      for (int root = 0; root < size(); ++root) RunBroadcast(dtype, n, root);
    }
  }
}

TEST_P(CommConformanceTest, BroadcastLarge) {
  SKIP_IF_UNAVAILABLE();
  RunBroadcast(DType::kI32, kLargeCount, size() - 1);
}

TEST_P(CommConformanceTest, AllToAllEveryDTypeAndCount) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : kAllToAllDTypes) {
    for (int64_t n : kAllToAllCounts) RunAllToAll(dtype, n);
  }
}

// Every element carries a code unique to (source rank, destination rank,
// index), so a block delivered to the wrong rank, the wrong slot or out of
// order cannot pass: rank s sends code(s, d, i) = (s·size + d)·count + i as
// element i of block d, and rank d must hold code(s, d, i) at s·count + i.
// Codes stay below 256 (size <= 6 at count 7): exact in bf16, and in i8 as
// code - 128.
TEST_P(CommConformanceTest, AllToAllBlocksLandAtTheirRanksInOrder) {
  SKIP_IF_UNAVAILABLE();
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    for (int64_t n : {int64_t{1}, int64_t{7}}) {
      SCOPED_TRACE(absl::StrCat("AllToAll ", DTypeName(dtype), " count ", n));
      ASSERT_LE(size() * size() * n, 256) << "codes would not fit in a byte";
      const double shift = dtype == DType::kI8 ? -128 : 0;
      auto code = [&](int src, int dst, int64_t i) {
        return static_cast<double>((src * size() + dst) * n + i) + shift;
      };
      Staged in(device(), dtype, n * size()), out(device(), dtype, n * size());
      for (int d = 0; d < size(); ++d) {
        for (int64_t i = 0; i < n; ++i) in.Set(d * n + i, code(rank(), d, i));
      }
      in.Upload();
      ASSERT_TRUE(comm_->AllToAll(in.data(), out.data(), n, dtype)->Wait().ok());
      out.Download();
      for (int s = 0; s < size(); ++s) {
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(out.Get(s * n + i), code(s, rank(), i)) << "from rank " << s << " element " << i;
        }
      }
      // The input is left as it was.
      in.Download();
      for (int d = 0; d < size(); ++d) {
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(in.Get(d * n + i), code(rank(), d, i));
      }
    }
  }
}

// Count 0 on every rank is a valid collective that moves nothing.
TEST_P(CommConformanceTest, AllToAllOfZeroElementsWritesNothing) {
  SKIP_IF_UNAVAILABLE();
  Staged in(device(), DType::kI8, 0), out(device(), DType::kI8, 0);
  ASSERT_TRUE(comm_->AllToAll(in.data(), out.data(), 0, DType::kI8)->Wait().ok());
  EXPECT_EQ(static_cast<const uint8_t*>(out.host())[0], 0x7f);
  EXPECT_EQ(comm_->Stats()[CommOp::kAllToAll].calls, 1);
  EXPECT_EQ(comm_->Stats()[CommOp::kAllToAll].bytes_sent, 0);
  // The communicator is still in step on every rank.
  RunAllToAll(DType::kF32, 3);
}

TEST_P(CommConformanceTest, AllToAllLarge) {
  SKIP_IF_UNAVAILABLE();
  // ~4 Mi elements in each rank's input, over a block size that is odd.
  RunAllToAll(DType::kF32, (kLargeCount / size()) | 1);
  RunAllToAll(DType::kI8, (kLargeCount / size()) | 1);
}

// Each rank sends to its right neighbour and receives from its left, issuing
// both before waiting: must not deadlock even when the message is too large
// to be sent eagerly.
TEST_P(CommConformanceTest, SendRecvRing) {
  SKIP_IF_UNAVAILABLE();
  for (int64_t n : {int64_t{1}, int64_t{1001}, int64_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat("count ", n));
    const int right = (rank() + 1) % size();
    const int left = (rank() + size() - 1) % size();
    Staged out(device(), DType::kF32, n);
    Staged in(device(), DType::kF32, n);
    Fill(out, rank(), n, 6);
    auto send = comm_->Send(out.data(), n, DType::kF32, right, 7);
    auto recv = comm_->Recv(in.data(), n, DType::kF32, left, 7);
    ASSERT_TRUE(recv->Wait().ok());
    ASSERT_TRUE(send->Wait().ok());
    in.Download();
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += in.Get(i) != Value(seed_, left, i, 6);
    EXPECT_EQ(bad, 0);
  }
}

TEST_P(CommConformanceTest, BarrierWaitsForTheLastRank) {
  SKIP_IF_UNAVAILABLE();
  if (size() == 1) {
    EXPECT_TRUE(comm_->Barrier()->Wait().ok());
    return;
  }
  ASSERT_TRUE(comm_->Barrier()->Wait().ok());
  const absl::Time start = absl::Now();
  if (rank() == size() - 1) absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(comm_->Barrier()->Wait().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
}

// Several collectives in flight at once, waited in reverse order.
TEST_P(CommConformanceTest, AsyncOverlapWaitedInAnotherOrder) {
  SKIP_IF_UNAVAILABLE();
  const int64_t n = 4097;
  std::vector<std::unique_ptr<Staged>> bufs;
  std::vector<std::unique_ptr<Work>> works;
  for (int k = 0; k < 6; ++k) {
    bufs.push_back(std::make_unique<Staged>(device(), DType::kF32, n));
    Fill(*bufs.back(), rank(), n, 10 + k);
    works.push_back(comm_->AllReduce(bufs.back()->data(), n, DType::kF32, ReduceOp::kSum));
  }
  Staged gin(device(), DType::kI32, n), gout(device(), DType::kI32, n * size());
  Fill(gin, rank(), n, 3);
  works.push_back(comm_->AllGather(gin.data(), gout.data(), n, DType::kI32));
  Staged bc(device(), DType::kBF16, n);
  if (rank() == 0) Fill(bc, 0, n, 4);
  works.push_back(comm_->Broadcast(bc.data(), n, DType::kBF16, 0));
  Staged ain(device(), DType::kI8, n * size()), aout(device(), DType::kI8, n * size());
  Fill(ain, rank(), n * size(), 8);
  works.push_back(comm_->AllToAll(ain.data(), aout.data(), n, DType::kI8));
  // Compute while they run.
  volatile double sink = 0;
  for (int i = 0; i < 200000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  for (int k = static_cast<int>(works.size()) - 1; k >= 0; --k) ASSERT_TRUE(works[k]->Wait().ok()) << k;
  for (auto& w : works) EXPECT_TRUE(w->IsCompleted());
  for (int k = 0; k < 6; ++k) EXPECT_EQ(CheckReduced(*bufs[k], n, ReduceOp::kSum, DType::kF32, 10 + k, 0), 0);
  gout.Download();
  for (int r = 0; r < size(); ++r) EXPECT_EQ(gout.Get(r * n + n - 1), Value(seed_, r, n - 1, 3));
  bc.Download();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bc.Get(i), Value(seed_, 0, i, 4)) << i;
  aout.Download();
  for (int r = 0; r < size(); ++r) {
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(aout.Get(r * n + i), Value(seed_, r, rank() * n + i, 8)) << r << " " << i;
  }
}

// Progress without Wait: issued collectives complete while the caller only
// polls IsCompleted (the progress thread, not the waiter, runs them).
TEST_P(CommConformanceTest, CompletesWithoutWait) {
  SKIP_IF_UNAVAILABLE();
  const int64_t n = 1 << 16;
  Staged a(device(), DType::kF32, n), b(device(), DType::kI32, n);
  Fill(a, rank(), n, 20);
  Fill(b, rank(), n, 21);
  auto first = comm_->AllReduce(a.data(), n, DType::kF32, ReduceOp::kSum);
  auto second = comm_->AllReduce(b.data(), n, DType::kI32, ReduceOp::kMax);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!(first->IsCompleted() && second->IsCompleted()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Microseconds(100));
  }
  ASSERT_TRUE(first->IsCompleted());
  ASSERT_TRUE(second->IsCompleted());
  EXPECT_TRUE(first->Wait(absl::ZeroDuration()).ok());
  EXPECT_TRUE(second->Wait(absl::ZeroDuration()).ok());
  EXPECT_EQ(CheckReduced(a, n, ReduceOp::kSum, DType::kF32, 20, 0), 0);
  EXPECT_EQ(CheckReduced(b, n, ReduceOp::kMax, DType::kI32, 21, 0), 0);
}

// The MPI backend reports when each collective executed: after its issue,
// before its Wait returned, and in issue order. NCCL runs on the device and
// reports nothing.
TEST_P(CommConformanceTest, ExecutedSpansFollowIssueOrder) {
  SKIP_IF_UNAVAILABLE();
  const int64_t n = 1 << 12;
  std::vector<std::unique_ptr<Staged>> bufs;
  std::vector<std::unique_ptr<Work>> works;
  const auto issued = std::chrono::steady_clock::now();
  for (int k = 0; k < 4; ++k) {
    bufs.push_back(std::make_unique<Staged>(device(), DType::kF32, n));
    Fill(*bufs.back(), rank(), n, 30 + k);
    works.push_back(comm_->AllReduce(bufs.back()->data(), n, DType::kF32, ReduceOp::kSum));
  }
  for (auto& w : works) ASSERT_TRUE(w->Wait().ok());
  const auto waited = std::chrono::steady_clock::now();
  if (GetParam().name == "nccl") {
    for (auto& w : works) EXPECT_FALSE(w->ExecutedSpan().has_value());
    return;
  }
  std::optional<WorkSpan> previous;
  for (size_t k = 0; k < works.size(); ++k) {
    std::optional<WorkSpan> span = works[k]->ExecutedSpan();
    ASSERT_TRUE(span.has_value()) << k;
    EXPECT_GE(span->start, issued) << k;
    EXPECT_LE(span->start, span->end) << k;
    EXPECT_LE(span->end, waited) << k;
    if (previous.has_value()) {
      EXPECT_GE(span->start, previous->end) << k;
    }
    previous = span;
  }
}

// color = rank parity, key = -rank: each group is its members in reverse.
TEST_P(CommConformanceTest, SplitByParityInReverseOrder) {
  SKIP_IF_UNAVAILABLE();
  auto sub_or = comm_->Split(rank() % 2, -rank(), "parity");
  ASSERT_TRUE(sub_or.ok()) << sub_or.status();
  std::unique_ptr<Communicator> sub = std::move(sub_or).value();
  std::vector<int> members;
  for (int r = size() - 1; r >= 0; --r) {
    if (r % 2 == rank() % 2) members.push_back(r);
  }
  EXPECT_EQ(sub->name(), "parity");
  ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[sub->rank()], rank());
  Staged in(sub->device(), DType::kI32, 1), out(sub->device(), DType::kI32, sub->size());
  in.Set(0, rank());
  in.Upload();
  ASSERT_TRUE(sub->AllGather(in.data(), out.data(), 1, DType::kI32)->Wait().ok());
  out.Download();
  for (int i = 0; i < sub->size(); ++i) EXPECT_EQ(out.Get(i), members[i]);
  // The parent still works after the split, and the two are independent.
  Staged one(device(), DType::kI32, 1);
  one.Set(0, 1);
  one.Upload();
  ASSERT_TRUE(comm_->AllReduce(one.data(), 1, DType::kI32, ReduceOp::kSum)->Wait().ok());
  one.Download();
  EXPECT_EQ(one.Get(0), size());
}

TEST_P(CommConformanceTest, StatsCountCallsAndRingBytes) {
  SKIP_IF_UNAVAILABLE();
  const int64_t n = 64;
  Staged a(device(), DType::kF32, n * size()), b(device(), DType::kF32, n * size());
  ASSERT_TRUE(comm_->AllReduce(a.data(), n, DType::kF32, ReduceOp::kSum)->Wait().ok());
  ASSERT_TRUE(comm_->AllGather(a.data(), b.data(), n, DType::kF32)->Wait().ok());
  ASSERT_TRUE(comm_->ReduceScatter(b.data(), a.data(), n, DType::kF32, ReduceOp::kMax)->Wait().ok());
  ASSERT_TRUE(comm_->Broadcast(a.data(), n, DType::kF32, 0)->Wait().ok());
  const CommStats s = comm_->Stats();
  const int64_t bytes = n * 4;
  EXPECT_EQ(s[CommOp::kAllReduce].calls, 1);
  EXPECT_EQ(s[CommOp::kAllReduce].bytes_sent, 2 * (size() - 1) * bytes / size());
  EXPECT_EQ(s[CommOp::kAllGather].bytes_received, (size() - 1) * bytes);
  EXPECT_EQ(s[CommOp::kReduceScatter].bytes_sent, (size() - 1) * bytes);
  EXPECT_EQ(s[CommOp::kBroadcast].bytes_sent, rank() == 0 && size() > 1 ? bytes : 0);
  EXPECT_EQ(s[CommOp::kBroadcast].bytes_received, rank() != 0 ? bytes : 0);
  EXPECT_EQ(s.Total().calls, 4);
}

// AllToAll keeps its own block and exchanges the other n-1 of count
// elements each: (n-1)/n of the input out, as much in (comm_stats.h).
TEST_P(CommConformanceTest, StatsCountAllToAllCallsAndBytes) {
  SKIP_IF_UNAVAILABLE();
  Staged a(device(), DType::kF32, 7 * size()), b(device(), DType::kF32, 7 * size());
  Staged c(device(), DType::kI8, 5 * size()), d(device(), DType::kI8, 5 * size());
  ASSERT_TRUE(comm_->AllToAll(a.data(), b.data(), 7, DType::kF32)->Wait().ok());
  ASSERT_TRUE(comm_->AllToAll(c.data(), d.data(), 5, DType::kI8)->Wait().ok());
  const CommStats s = comm_->Stats();
  const int64_t per_call_block_bytes = 7 * 4 + 5 * 1;
  EXPECT_EQ(s[CommOp::kAllToAll].calls, 2);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_sent, (size() - 1) * per_call_block_bytes);
  EXPECT_EQ(s[CommOp::kAllToAll].bytes_received, (size() - 1) * per_call_block_bytes);
  EXPECT_EQ(s[CommOp::kAllGather].calls, 0);
  EXPECT_EQ(s.Total().calls, 2);
  EXPECT_EQ(s.Total().bytes_sent, (size() - 1) * per_call_block_bytes);
}

// i8 moves (AllGather, Broadcast, AllToAll, Send/Recv) but does not reduce.
TEST_P(CommConformanceTest, I8ReductionsAreRejectedAtIssue) {
  SKIP_IF_UNAVAILABLE();
  Staged buf(device(), DType::kI8, 4 * size()), out(device(), DType::kI8, 4);
  const std::string want = "dtype i8 cannot be reduced; expected f32, f16, bf16 or i32";
  for (ReduceOp op : kOps) {
    SCOPED_TRACE(ReduceOpName(op));
    absl::Status s = comm_->AllReduce(buf.data(), 4, DType::kI8, op)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), want);
    s = comm_->ReduceScatter(buf.data(), out.data(), 4, DType::kI8, op)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), want);
  }
  // Nothing was queued, and i8 still moves.
  RunAllGather(DType::kI8, 7);
  RunBroadcast(DType::kI8, 7, size() - 1);
}

TEST_P(CommConformanceTest, AllToAllArgumentErrorsQueueNothing) {
  SKIP_IF_UNAVAILABLE();
  Staged buf(device(), DType::kF32, 4 * size() + 1), out(device(), DType::kF32, 4 * size());
  absl::Status s = comm_->AllToAll(buf.data(), out.data(), -1, DType::kF32)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "element count -1 must be >= 0");
  // Output one element into the input, and the same buffer for both.
  char* base = static_cast<char*>(buf.data());
  for (void* o : {static_cast<void*>(base + sizeof(float)), static_cast<void*>(base)}) {
    s = comm_->AllToAll(buf.data(), o, 4, DType::kF32)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "AllToAll input and output overlap; they must be separate buffers");
  }
  EXPECT_EQ(comm_->Stats()[CommOp::kAllToAll].calls, 0);
  // Adjacent buffers do not overlap, and the communicator is in step.
  Staged adjacent(device(), DType::kF32, 8 * size());
  Fill(adjacent, rank(), 4 * size(), 9);
  char* a = static_cast<char*>(adjacent.data());
  ASSERT_TRUE(comm_->AllToAll(a, a + 4 * size() * sizeof(float), 4, DType::kF32)->Wait().ok());
  adjacent.Download();
  for (int r = 0; r < size(); ++r) {
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(adjacent.Get(4 * size() + r * 4 + i), Value(seed_, r, rank() * 4 + i, 9)) << r << " " << i;
    }
  }
}

TEST_P(CommConformanceTest, InvalidArgumentsFailAtIssueWithoutBreakingTheCommunicator) {
  SKIP_IF_UNAVAILABLE();
  Staged buf(device(), DType::kF32, 4);
  absl::Status s = comm_->AllReduce(buf.data(), -1, DType::kF32, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "element count -1 must be >= 0");
  s = comm_->Broadcast(buf.data(), 4, DType::kF32, size())->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("root ", size(), " is not a rank of group world (size ", size(), ")"));
  s = comm_->AllReduce(buf.data(), 4, DType::kU16, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "dtype u16 cannot be reduced; expected f32, f16, bf16 or i32");
  s = comm_->Send(buf.data(), 4, DType::kF32, -1, 0)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), absl::StrCat("peer -1 is not a rank of group world (size ", size(), ")"));
  s = comm_->Recv(buf.data(), 4, DType::kF32, 0, 40000)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "tag 40000 is outside [0, 32767]");
  EXPECT_EQ(comm_->Split(-2, 0, "bad").status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was queued: the next collective works.
  EXPECT_TRUE(comm_->Barrier()->Wait().ok());
}

TEST_P(CommConformanceTest, DebugChecksPassMatchingCollectives) {
  SKIP_IF_UNAVAILABLE();
  CommOptions options;
  options.debug_checks = true;
  auto checked = Create(options);
  ASSERT_NE(checked, nullptr);
  Staged buf(device(), DType::kF32, 3 * size()), out(device(), DType::kF32, 3 * size());
  Fill(buf, rank(), 3, 1);
  ASSERT_TRUE(checked->AllReduce(buf.data(), 3, DType::kF32, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(CheckReduced(buf, 3, ReduceOp::kSum, DType::kF32, 1, 0), 0);
  EXPECT_TRUE(checked->AllGather(buf.data(), out.data(), 3, DType::kF32)->Wait().ok());
  EXPECT_TRUE(checked->Broadcast(buf.data(), 3, DType::kF32, size() - 1)->Wait().ok());
  EXPECT_TRUE(checked->AllToAll(buf.data(), out.data(), 3, DType::kF32)->Wait().ok());
  EXPECT_TRUE(checked->Barrier()->Wait().ok());
  auto sub = checked->Split(0, rank(), "all");
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_TRUE((*sub)->Barrier()->Wait().ok());
}

// In-process (non-fatal) mismatch: every rank gets the same message, and the
// communicator refuses further work.
TEST_P(CommConformanceTest, DebugChecksFailEveryRankOnMismatch) {
  SKIP_IF_UNAVAILABLE();
  if (size() < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  CommOptions options;
  options.debug_checks = true;
  auto checked = Create(options);
  ASSERT_NE(checked, nullptr);
  Staged in(device(), DType::kF32, 8 * size()), out(device(), DType::kF32, 8 * size());
  ASSERT_TRUE(checked->Barrier()->Wait().ok());  // collective #1
  absl::Status s = rank() == 1 ? checked->AllGather(in.data(), out.data(), 2, DType::kF32)->Wait()
                               : checked->ReduceScatter(in.data(), out.data(), 8, DType::kF32, ReduceOp::kSum)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  std::string others = "rank 0";
  if (size() > 2) {
    others = "ranks 0";
    for (int r = 2; r < size(); ++r) absl::StrAppend(&others, ",", r);
  }
  EXPECT_EQ(s.message(), absl::StrCat("collective #2 mismatch in group world: ", others,
                                      " called ReduceScatter(f32, 8), rank 1 called AllGather(f32, 2)"));
  absl::Status after = checked->Barrier()->Wait();
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(after.message(), absl::StrCat("communicator world is unusable after an earlier failure: ", s.message()));
}

// Same count and dtype on every rank: only the op in the fingerprint differs.
TEST_P(CommConformanceTest, DebugChecksNameAllToAllAgainstAllGather) {
  SKIP_IF_UNAVAILABLE();
  if (size() < 2) GTEST_SKIP() << "a mismatch needs two ranks";
  CommOptions options;
  options.debug_checks = true;
  auto checked = Create(options);
  ASSERT_NE(checked, nullptr);
  Staged in(device(), DType::kBF16, 4 * size()), out(device(), DType::kBF16, 4 * size());
  ASSERT_TRUE(checked->AllToAll(in.data(), out.data(), 4, DType::kBF16)->Wait().ok());  // collective #1
  const int odd = size() - 1;
  absl::Status s = rank() == odd ? checked->AllGather(in.data(), out.data(), 4, DType::kBF16)->Wait()
                                 : checked->AllToAll(in.data(), out.data(), 4, DType::kBF16)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  std::string others = size() > 2 ? "ranks 0" : "rank 0";
  for (int r = 1; r < odd; ++r) absl::StrAppend(&others, ",", r);
  EXPECT_EQ(s.message(), absl::StrCat("collective #2 mismatch in group world: ", others,
                                      " called AllToAll(bf16, 4), rank ", odd, " called AllGather(bf16, 4)"));
  absl::Status after = checked->AllToAll(in.data(), out.data(), 4, DType::kBF16)->Wait();
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition);
}

// The MPI backend widens f16/bf16 reductions into one reusable f32 staging
// buffer, counted as kCommBuffers in options.tracker until the communicator
// goes away.
TEST_P(CommConformanceTest, LowPrecisionStagingIsTracked) {
  SKIP_IF_UNAVAILABLE();
  if (GetParam().name != "mpi") GTEST_SKIP() << "only the MPI backend stages through f32";
  MemoryTracker tracker;
  CommOptions options;
  options.tracker = &tracker;
  auto tracked = Create(options);
  ASSERT_NE(tracked, nullptr);
  const int64_t n = 1000;
  Staged buf(device(), DType::kBF16, n * size()), out(device(), DType::kBF16, n);
  Fill(buf, rank(), n, 1);
  ASSERT_TRUE(tracked->AllReduce(buf.data(), n, DType::kBF16, ReduceOp::kSum)->Wait().ok());
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, n * 4);
  ASSERT_TRUE(tracked->ReduceScatter(buf.data(), out.data(), n, DType::kBF16, ReduceOp::kMax)->Wait().ok());
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, n * (size() + 1) * 4);
  ASSERT_TRUE(tracked->AllReduce(buf.data(), 10, DType::kF16, ReduceOp::kSum)->Wait().ok());  // reuses it
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, n * (size() + 1) * 4);
  tracked.reset();
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).current, 0);
  EXPECT_EQ(tracker.Usage(MemoryCategory::kCommBuffers).peak, n * (size() + 1) * 4);
}

const Backend kBackends[] = {
    {"mpi", [](const CommOptions& o) { return CreateMpiWorld(o); }},
    {"nccl", [](const CommOptions& o) { return CreateNcclWorld(o); }},
    // MPI over staged device buffers: GPU memory where a GPU is usable, host
    // memory (plain copies) elsewhere.
    {"mpi_staged",
     [](const CommOptions& o) -> absl::StatusOr<std::unique_ptr<Communicator>> {
       absl::StatusOr<std::unique_ptr<Communicator>> host = CreateMpiWorld(o);
       if (!host.ok()) return host.status();
       return CreateStagedCommunicator(std::move(*host), CudaAvailable() ? Device::kCuda : Device::kCpu);
     }},
};

INSTANTIATE_TEST_SUITE_P(Backends, CommConformanceTest, testing::ValuesIn(kBackends),
                         [](const testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace zeroshard
