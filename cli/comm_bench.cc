#include "cli/comm_bench.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/args.h"
#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "core/device.h"
#include "core/status_macros.h"

#ifdef ZEROSHARD_HAS_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace zeroshard::cli {
namespace {

constexpr char kUsage[] =
    "usage: mpirun -np N zeroshard comm-bench [--backend mpi|nccl]\n"
    "         [--ops all_reduce,all_gather,reduce_scatter,broadcast] [--min-bytes B] [--max-bytes B]\n"
    "         [--factor F] [--iters N] [--warmup N] [--dtype f32|f16|bf16|i32]\n"
    "         [--group world|dp|tp|pp] [--dp N] [--tp N] [--pp N]\n"
    "\n"
    "Times each collective through zeroshard's Communicator and directly on the\n"
    "raw MPI (or NCCL) API over the same group, and prints size, count, median\n"
    "time (us), algbw and busbw (GB/s, nccl-tests formulas) for both, their ratio,\n"
    "and the latency of a one-element all-reduce. Reductions use sum.\n"
    "Defaults: mpi, all four ops, 1 KiB..16 MiB by x4, 20 iters, 5 warmup, f32,\n"
    "group world, dp = N / (tp * pp).\n";

int64_t ElemCountPerRank(BenchOp op, int64_t bytes, int n, size_t elem) {
  const int64_t count = bytes / static_cast<int64_t>(elem);
  return (op == BenchOp::kAllGather || op == BenchOp::kReduceScatter) ? count / n : count;
}

// ---- raw baselines ---------------------------------------------------------

// The same collective without zeroshard: direct MPI or NCCL calls. `count`
// is per rank for all_gather/reduce_scatter, the buffer count otherwise.
class RawCollectives {
 public:
  virtual ~RawCollectives() = default;
  virtual absl::Status Run(BenchOp op, void* in, void* out, int64_t count, DType dtype) = 0;
};

template <bool kIsBF16>
void HalfSum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    b[i] = kIsBF16 ? F32ToBF16(BF16ToF32(a[i]) + BF16ToF32(b[i])) : F32ToF16(F16ToF32(a[i]) + F16ToF32(b[i]));
  }
}

// f32/i32 reduce with MPI_SUM; f16/bf16 with a user-defined MPI op that
// rounds after every pairwise add (the usual hand-written alternative to
// zeroshard's f32 staging).
class RawMpi : public RawCollectives {
 public:
  explicit RawMpi(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_size(comm_, &size_);
    MPI_Op_create(&HalfSum<true>, 1, &bf16_sum_);
    MPI_Op_create(&HalfSum<false>, 1, &f16_sum_);
  }
  ~RawMpi() override {
    MPI_Op_free(&bf16_sum_);
    MPI_Op_free(&f16_sum_);
  }
  absl::Status Run(BenchOp op, void* in, void* out, int64_t count, DType dtype) override {
    const int c = static_cast<int>(count);
    MPI_Datatype t = MpiRawType(dtype);
    MPI_Op sum = dtype == DType::kBF16 ? bf16_sum_ : dtype == DType::kF16 ? f16_sum_ : MPI_SUM;
    switch (op) {
      case BenchOp::kAllReduce:
        return MpiStatus(MPI_Allreduce(MPI_IN_PLACE, in, c, t, sum, comm_), "MPI_Allreduce");
      case BenchOp::kAllGather:
        return MpiStatus(MPI_Allgather(in, c, t, out, c, t, comm_), "MPI_Allgather");
      case BenchOp::kReduceScatter:
        return MpiStatus(MPI_Reduce_scatter_block(in, out, c, t, sum, comm_), "MPI_Reduce_scatter_block");
      case BenchOp::kBroadcast:
        return MpiStatus(MPI_Bcast(in, c, t, 0, comm_), "MPI_Bcast");
    }
    return absl::OkStatus();
  }

 private:
  MPI_Comm comm_;
  int size_ = 1;
  MPI_Op bf16_sum_, f16_sum_;
};

#ifdef ZEROSHARD_HAS_CUDA
absl::Status NcclCheck(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", ncclGetErrorString(r)));
}

ncclDataType_t RawNcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI8:
      return ncclInt8;
    default:
      return ncclFloat16;
  }
}

// Its own NCCL communicator over the group, on its own stream, synchronised
// after every call (what a Work::Wait does).
class RawNccl : public RawCollectives {
 public:
  static absl::StatusOr<std::unique_ptr<RawCollectives>> Create(MPI_Comm group) {
    int rank = 0, size = 1;
    MPI_Comm_rank(group, &rank);
    MPI_Comm_size(group, &size);
    ncclUniqueId id;
    if (rank == 0) RETURN_IF_ERROR(NcclCheck(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
    auto raw = std::make_unique<RawNccl>();
    RETURN_IF_ERROR(NcclCheck(ncclCommInitRank(&raw->comm_, size, id, rank), "ncclCommInitRank"));
    if (cudaStreamCreateWithFlags(&raw->stream_, cudaStreamNonBlocking) != cudaSuccess) {
      return absl::InternalError("cudaStreamCreate failed");
    }
    return std::unique_ptr<RawCollectives>(std::move(raw));
  }
  ~RawNccl() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  absl::Status Run(BenchOp op, void* in, void* out, int64_t count, DType dtype) override {
    const ncclDataType_t t = RawNcclType(dtype);
    ncclResult_t r = ncclSuccess;
    switch (op) {
      case BenchOp::kAllReduce:
        r = ncclAllReduce(in, in, count, t, ncclSum, comm_, stream_);
        break;
      case BenchOp::kAllGather:
        r = ncclAllGather(in, out, count, t, comm_, stream_);
        break;
      case BenchOp::kReduceScatter:
        r = ncclReduceScatter(in, out, count, t, ncclSum, comm_, stream_);
        break;
      case BenchOp::kBroadcast:
        r = ncclBroadcast(in, in, count, t, 0, comm_, stream_);
        break;
    }
    RETURN_IF_ERROR(NcclCheck(r, BenchOpName(op)));
    if (cudaStreamSynchronize(stream_) != cudaSuccess) return absl::InternalError("cudaStreamSynchronize failed");
    return absl::OkStatus();
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};
#endif

absl::Status RunOurs(Communicator& comm, BenchOp op, void* in, void* out, int64_t count, DType dtype) {
  switch (op) {
    case BenchOp::kAllReduce:
      return comm.AllReduce(in, count, dtype, ReduceOp::kSum)->Wait();
    case BenchOp::kAllGather:
      return comm.AllGather(in, out, count, dtype)->Wait();
    case BenchOp::kReduceScatter:
      return comm.ReduceScatter(in, out, count, dtype, ReduceOp::kSum)->Wait();
    case BenchOp::kBroadcast:
      return comm.Broadcast(in, count, dtype, 0)->Wait();
  }
  return absl::OkStatus();
}

// ---- measurement -----------------------------------------------------------

struct Timing {
  double ours_us = 0;  // medians
  double raw_us = 0;
  double ours_min_us = 0;  // fastest iterations: the layer's own cost, without the host's scheduling noise
  double raw_min_us = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Buffers for one row, on the backend's device, filled with 1s (no
// overflow or NaN work).
class BenchBuffers {
 public:
  static absl::StatusOr<BenchBuffers> Create(Device device, DType dtype, int64_t elems) {
    BenchBuffers b;
    b.device_ = device;
    b.bytes_ = static_cast<size_t>(elems) * DTypeSize(dtype);
    ASSIGN_OR_RETURN(b.in_, DeviceAlloc(device, std::max<size_t>(b.bytes_, 64)));
    ASSIGN_OR_RETURN(b.out_, DeviceAlloc(device, std::max<size_t>(b.bytes_, 64)));
    std::vector<uint8_t> ones(b.bytes_);
    for (int64_t i = 0; i < elems; ++i) {
      switch (dtype) {
        case DType::kF32: {
          const float one = 1.0f;
          std::memcpy(&ones[i * 4], &one, 4);
          break;
        }
        case DType::kI32: {
          const int32_t one = 1;
          std::memcpy(&ones[i * 4], &one, 4);
          break;
        }
        case DType::kI8:
          ones[i] = 1;
          break;
        default: {
          const uint16_t one = dtype == DType::kBF16 ? F32ToBF16(1.0f) : F32ToF16(1.0f);
          std::memcpy(&ones[i * 2], &one, 2);
        }
      }
    }
    RETURN_IF_ERROR(DeviceCopy(b.in_, device, ones.data(), Device::kCpu, b.bytes_));
    RETURN_IF_ERROR(DeviceCopy(b.out_, device, ones.data(), Device::kCpu, b.bytes_));
    return b;
  }
  BenchBuffers() = default;
  BenchBuffers(BenchBuffers&& o) noexcept { *this = std::move(o); }
  BenchBuffers& operator=(BenchBuffers&& o) noexcept {
    std::swap(in_, o.in_);
    std::swap(out_, o.out_);
    device_ = o.device_;
    bytes_ = o.bytes_;
    return *this;
  }
  ~BenchBuffers() {
    DeviceFree(device_, in_);
    DeviceFree(device_, out_);
  }
  void* in() { return in_; }
  void* out() { return out_; }

 private:
  Device device_ = Device::kCpu;
  size_t bytes_ = 0;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

using Clock = std::chrono::steady_clock;

// Alternates raw and ours, each after a barrier on the world; per iteration
// the slowest rank's time counts.
absl::StatusOr<Timing> TimeOp(Communicator& ours, RawCollectives& raw, BenchOp op, int64_t count, DType dtype,
                              int64_t buffer_elems, Device device, int iters, int warmup) {
  ASSIGN_OR_RETURN(BenchBuffers buf, BenchBuffers::Create(device, dtype, buffer_elems));
  std::vector<double> ours_us, raw_us;
  for (int i = 0; i < warmup + iters; ++i) {
    for (int which = 0; which < 2; ++which) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = Clock::now();
      absl::Status s = which == 0 ? raw.Run(op, buf.in(), buf.out(), count, dtype)
                                  : RunOurs(ours, op, buf.in(), buf.out(), count, dtype);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      RETURN_IF_ERROR(s);
      if (i >= warmup) (which == 0 ? raw_us : ours_us).push_back(us);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, ours_us.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, raw_us.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return Timing{Median(ours_us), Median(raw_us), *std::min_element(ours_us.begin(), ours_us.end()),
                *std::min_element(raw_us.begin(), raw_us.end())};
}

std::string GbPerS(double bytes, double us) { return absl::StrFormat("%7.3f", bytes / (us * 1e3)); }

absl::Status Bench(const CommBenchOptions& o, int world_rank, int world_size) {
  const bool nccl = o.backend == "nccl";
  CommOptions comm_options;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> world, nccl ? CreateNcclWorld(comm_options)
                                                             : CreateMpiWorld(comm_options));
  GridShape shape = o.shape;
  if (shape.dp == 0) shape.dp = std::max(1, world_size / std::max(1, shape.tp * shape.pp));
  ASSIGN_OR_RETURN(ProcessGrid grid, ProcessGrid::Create(std::move(world), shape));
  Communicator* ours = &grid.world();
  GridAxis axis = GridAxis::kDp;
  if (o.group != "world") {
    axis = o.group == "dp" ? GridAxis::kDp : o.group == "tp" ? GridAxis::kTp : GridAxis::kPp;
    ours = &grid.group(axis);
  }
  // The raw baseline runs over an MPI communicator with the same members.
  MPI_Comm raw_comm;
  if (o.group == "world") {
    MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
  } else {
    const auto groups = GroupsAlong(shape, axis);
    int color = 0, key = 0;
    for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
      for (int k = 0; k < static_cast<int>(groups[g].size()); ++k) {
        if (groups[g][k] == world_rank) color = g, key = k;
      }
    }
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &raw_comm);
  }
  std::unique_ptr<RawCollectives> raw;
  if (nccl) {
#ifdef ZEROSHARD_HAS_CUDA
    ASSIGN_OR_RETURN(raw, RawNccl::Create(raw_comm));
#endif
  } else {
    raw = std::make_unique<RawMpi>(raw_comm);
  }
  const int n = ours->size();
  const Device device = ours->device();
  const size_t elem = DTypeSize(o.dtype);
  const bool print = world_rank == 0;
  if (print) {
    std::printf("# zeroshard comm-bench: backend %s, group %s (%d ranks; world %d, grid dp=%d tp=%d pp=%d), dtype %s,"
                " iters %d, warmup %d\n",
                o.backend.c_str(), o.group.c_str(), n, world_size, shape.dp, shape.tp, shape.pp,
                DTypeName(o.dtype), o.iters, o.warmup);
    std::printf("# time: median over iterations of the slowest rank (us); bandwidth in GB/s; raw = direct %s calls;\n"
                "# min o/r: ratio of the fastest iterations (the layer's cost without scheduling noise)\n",
                nccl ? "NCCL" : "MPI");
  }
  for (BenchOp op : o.ops) {
    if (print) {
      std::printf("#\n# %s%s, busbw = algbw x %.4f\n", BenchOpName(op),
                  op == BenchOp::kBroadcast ? " (root 0)" : op == BenchOp::kAllGather ? "" : " (sum)",
                  BusBandwidthFactor(op, n));
      std::printf("# %12s %12s | %10s %8s %8s | %10s %8s %8s | %9s %9s\n", "size(B)", "count", "ours(us)", "algbw",
                  "busbw", "raw(us)", "algbw", "busbw", "ours/raw", "min o/r");
    }
    for (int64_t bytes : BenchSizes(o, n)) {
      const int64_t count = ElemCountPerRank(op, bytes, n, elem);
      ASSIGN_OR_RETURN(Timing t, TimeOp(*ours, *raw, op, count, o.dtype, bytes / elem, device, o.iters, o.warmup));
      if (print) {
        const double bus = BusBandwidthFactor(op, n);
        std::printf("  %12lld %12lld | %10.1f %8s %8s | %10.1f %8s %8s | %9.3f %9.3f\n",
                    static_cast<long long>(bytes), static_cast<long long>(bytes / elem), t.ours_us,
                    GbPerS(bytes, t.ours_us).c_str(), GbPerS(bytes * bus, t.ours_us).c_str(), t.raw_us,
                    GbPerS(bytes, t.raw_us).c_str(), GbPerS(bytes * bus, t.raw_us).c_str(), t.ours_us / t.raw_us,
                    t.ours_min_us / t.raw_min_us);
      }
    }
    std::fflush(stdout);
  }
  // Latency: a one-element all-reduce, many iterations.
  const int lat_iters = std::max(10 * o.iters, 100);
  ASSIGN_OR_RETURN(Timing lat, TimeOp(*ours, *raw, BenchOp::kAllReduce, 1, o.dtype, 1, device, lat_iters, o.warmup));
  if (print) {
    std::printf("#\n# one-element all_reduce latency (%d iters): ours %.1f us, raw %.1f us, ours/raw %.3f"
                " (min: ours %.1f us, raw %.1f us)\n",
                lat_iters, lat.ours_us, lat.raw_us, lat.ours_us / lat.raw_us, lat.ours_min_us, lat.raw_min_us);
    std::fflush(stdout);
  }
  raw.reset();
  MPI_Comm_free(&raw_comm);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PositiveFlag(const ParsedArgs& args, const char* name, int64_t fallback) {
  ASSIGN_OR_RETURN(long long v, args.GetInt(name, fallback));
  if (v < 1) return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", v, " must be >= 1"));
  return static_cast<int64_t>(v);
}

}  // namespace

const char* BenchOpName(BenchOp op) {
  switch (op) {
    case BenchOp::kAllReduce:
      return "all_reduce";
    case BenchOp::kAllGather:
      return "all_gather";
    case BenchOp::kReduceScatter:
      return "reduce_scatter";
    case BenchOp::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

double BusBandwidthFactor(BenchOp op, int n) {
  switch (op) {
    case BenchOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case BenchOp::kAllGather:
    case BenchOp::kReduceScatter:
      return static_cast<double>(n - 1) / n;
    case BenchOp::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

std::vector<int64_t> BenchSizes(const CommBenchOptions& o, int group_size) {
  std::vector<int64_t> sizes;
  const int64_t quantum = static_cast<int64_t>(group_size) * DTypeSize(o.dtype);
  for (int64_t b = o.min_bytes; b <= o.max_bytes; b *= o.factor) {
    const int64_t rounded = b / quantum * quantum;
    if (rounded > 0 && (sizes.empty() || sizes.back() != rounded)) sizes.push_back(rounded);
    if (o.factor < 2) break;
  }
  return sizes;
}

absl::StatusOr<CommBenchOptions> ParseCommBenchArgs(int argc, char** argv) {
  ASSIGN_OR_RETURN(ParsedArgs args,
                   ParseArgs(argc, argv, 1,
                             {{"backend"}, {"ops"}, {"min-bytes"}, {"max-bytes"}, {"factor"}, {"iters"},
                              {"warmup"}, {"dtype"}, {"group"}, {"dp"}, {"tp"}, {"pp"}, {"help", false}}));
  if (!args.positional.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args.positional[0], "'"));
  }
  CommBenchOptions o;
  o.backend = args.Get("backend", o.backend);
  if (o.backend != "mpi" && o.backend != "nccl") {
    return absl::InvalidArgumentError(absl::StrCat("--backend: '", o.backend, "' is not mpi or nccl"));
  }
  if (args.Has("ops")) {
    o.ops.clear();
    for (absl::string_view name : absl::StrSplit(args.Get("ops"), ',', absl::SkipEmpty())) {
      bool found = false;
      for (BenchOp op : {BenchOp::kAllReduce, BenchOp::kAllGather, BenchOp::kReduceScatter, BenchOp::kBroadcast}) {
        if (name == BenchOpName(op)) {
          o.ops.push_back(op);
          found = true;
        }
      }
      if (!found) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--ops: '", name, "' is not one of all_reduce, all_gather, reduce_scatter, broadcast"));
      }
    }
    if (o.ops.empty()) return absl::InvalidArgumentError("--ops: no op given");
  }
  ASSIGN_OR_RETURN(o.min_bytes, PositiveFlag(args, "min-bytes", o.min_bytes));
  ASSIGN_OR_RETURN(o.max_bytes, PositiveFlag(args, "max-bytes", o.max_bytes));
  if (o.max_bytes < o.min_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-bytes ", o.max_bytes, " is smaller than --min-bytes ", o.min_bytes));
  }
  ASSIGN_OR_RETURN(int64_t factor, PositiveFlag(args, "factor", o.factor));
  if (factor < 2) return absl::InvalidArgumentError(absl::StrCat("--factor: ", factor, " must be >= 2"));
  o.factor = static_cast<int>(factor);
  ASSIGN_OR_RETURN(int64_t iters, PositiveFlag(args, "iters", o.iters));
  o.iters = static_cast<int>(iters);
  ASSIGN_OR_RETURN(long long warmup, args.GetInt("warmup", o.warmup));
  if (warmup < 0) return absl::InvalidArgumentError(absl::StrCat("--warmup: ", warmup, " must be >= 0"));
  o.warmup = static_cast<int>(warmup);
  if (args.Has("dtype")) {
    ASSIGN_OR_RETURN(o.dtype, ParseDType(args.Get("dtype")));
    if (o.dtype == DType::kU16 || o.dtype == DType::kI8) {
      return absl::InvalidArgumentError(absl::StrCat("--dtype: ", DTypeName(o.dtype), " cannot be reduced"));
    }
  }
  o.group = args.Get("group", o.group);
  if (o.group != "world" && o.group != "dp" && o.group != "tp" && o.group != "pp") {
    return absl::InvalidArgumentError(absl::StrCat("--group: '", o.group, "' is not world, dp, tp or pp"));
  }
  ASSIGN_OR_RETURN(int64_t dp, PositiveFlag(args, "dp", 1));
  ASSIGN_OR_RETURN(int64_t tp, PositiveFlag(args, "tp", 1));
  ASSIGN_OR_RETURN(int64_t pp, PositiveFlag(args, "pp", 1));
  o.shape = {args.Has("dp") ? static_cast<int>(dp) : 0, static_cast<int>(tp), static_cast<int>(pp)};
  return o;
}

int RunCommBench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::cout << kUsage;
      return 0;
    }
  }
  absl::StatusOr<CommBenchOptions> options = ParseCommBenchArgs(argc, argv);
  if (!options.ok()) {
    std::cerr << "zeroshard comm-bench: " << options.status().message() << "\n" << kUsage;
    return 2;
  }
  absl::Status init = EnsureMpiInitialized();
  if (!init.ok()) {
    std::cerr << "zeroshard comm-bench: " << init.message() << "\n";
    return 1;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  GridShape shape = options->shape;
  absl::Status s;
  if (shape.dp == 0 && size % (shape.tp * shape.pp) != 0) {
    s = absl::InvalidArgumentError(absl::StrCat("world size ", size, " is not a multiple of tp*pp = ",
                                                shape.tp * shape.pp, "; pass --dp or change --tp/--pp"));
  } else {
    if (shape.dp == 0) shape.dp = size / (shape.tp * shape.pp);
    s = ValidateGridShape(shape, size);
  }
  if (!s.ok()) {
    if (rank == 0) std::cerr << "zeroshard comm-bench: " << s.message() << "\n";
    FinalizeMpi();
    return 2;
  }
  s = Bench(*options, rank, size);
  if (!s.ok()) std::cerr << "zeroshard comm-bench: rank " << rank << ": " << s.message() << "\n";
  FinalizeMpi();
  return s.ok() ? 0 : 1;
}

const Subcommand kCommBench = {"comm-bench", "time collectives through zeroshard and raw MPI/NCCL (under mpirun)",
                               kUsage, RunCommBench};

}  // namespace zeroshard::cli
