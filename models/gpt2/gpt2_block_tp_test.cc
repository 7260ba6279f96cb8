// GPT-2's block ("h.0") under tensor parallelism: tp 2, 3 and 4 ranks as
// threads over a ThreadCommunicator group, each given its slices of the same
// global parameters (LocalToGlobalRuns), against the unsplit block (tp 1) on
// the same input; with and without sequence parallelism; split backward
// against Backward; bf16; saved-activation bytes and the collectives each
// call issues (docs/model.md, "Tensor parallelism").
//
// Collectives per call, counted per rank (AllGather: the per-rank input
// count; ReduceScatter: the per-rank output count; AllReduce: the buffer),
// N = B·T rows, C channels, tp ranks:
//   without sequence parallelism
//     Forward:        AllReduce N·C (attn.c_proj out), AllReduce N·C (mlp.c_proj out)
//     Backward:       AllReduce N·C (mlp.c_fc dX), AllReduce N·C (attn.c_attn dX)
//     BackwardInput:  as Backward;  BackwardWeight: none
//   with sequence parallelism
//     Forward:        AllGather N·C/tp (ln_1 out), ReduceScatter N·C/tp (attn.c_proj out),
//                     AllGather N·C/tp (ln_2 out), ReduceScatter N·C/tp (mlp.c_proj out)
//     Backward:       AllGather N·C/tp (dy), AllGather N·C/tp (ln_2 out, for c_fc's dW),
//                     ReduceScatter N·C/tp (mlp.c_fc dX), AllGather N·C/tp (attn.c_proj dY),
//                     AllGather N·C/tp (ln_1 out, for c_attn's dW), ReduceScatter N·C/tp
//                     (attn.c_attn dX), AllReduce 4·C (the LayerNorms' gradients)
//     BackwardInput:  AllGather dy, ReduceScatter, AllGather dY, ReduceScatter (N·C/tp each)
//     BackwardWeight: AllGather ln_2 out, AllGather ln_1 out (N·C/tp each), AllReduce 4·C
//   with the gathered LayerNorm outputs kept: Backward and BackwardWeight
//   without the two ln_1/ln_2 out gathers
// Bytes sent per rank (comm/comm_stats.h's ring convention, e element bytes):
// AllReduce 2(tp−1)/tp·count·e, AllGather and ReduceScatter (tp−1)·count·e.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "kernels/cast.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "nn/param_spec.h"
#include "nn/testing/grad_check.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

using testing::HostView;

// ---------------------------------------------------------------------------
// A Communicator that logs every collective and forwards it to a
// ThreadCommunicator; f16/bf16 reductions are widened to f32 around the
// forwarded call and rounded once, as the MPI backend does.

struct CommCall {
  CommOp op;
  int64_t count;  // per rank, as the Communicator API counts it
  DType dtype;
  bool operator==(const CommCall& o) const { return op == o.op && count == o.count && dtype == o.dtype; }
};

std::ostream& operator<<(std::ostream& os, const CommCall& c) {
  return os << CommOpName(c.op) << "(" << c.count << " " << DTypeName(c.dtype) << ")";
}

bool IsHalf(DType dt) { return dt == DType::kBF16 || dt == DType::kF16; }

class DoneWork : public Work {
 public:
  explicit DoneWork(absl::Status s) : status_(std::move(s)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    Log(CommOp::kAllGather, count, dtype);
    return inner_->AllGather(in, out, count, dtype);
  }
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    Log(CommOp::kAllToAll, count, dtype);
    return inner_->AllToAll(in, out, count, dtype);
  }
  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    Log(CommOp::kReduceScatter, count, dtype);
    if (!IsHalf(dtype)) return inner_->ReduceScatter(in, out, count, dtype, op);
    std::vector<float> wide_in = Widen(in, count * size(), dtype), wide_out(count);
    absl::Status s = inner_->ReduceScatter(wide_in.data(), wide_out.data(), count, DType::kF32, op)->Wait();
    if (s.ok()) s = Narrow(wide_out, out, dtype);
    return std::make_unique<DoneWork>(s);
  }
  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    Log(CommOp::kAllReduce, count, dtype);
    if (!IsHalf(dtype)) return inner_->AllReduce(buf, count, dtype, op);
    std::vector<float> wide = Widen(buf, count, dtype);
    absl::Status s = inner_->AllReduce(wide.data(), count, DType::kF32, op)->Wait();
    if (s.ok()) s = Narrow(wide, buf, dtype);
    return std::make_unique<DoneWork>(s);
  }
  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    Log(CommOp::kBroadcast, count, dtype);
    return inner_->Broadcast(buf, count, dtype, root);
  }
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    Log(CommOp::kSend, count, dtype);
    return inner_->Send(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    Log(CommOp::kRecv, count, dtype);
    return inner_->Recv(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Barrier() override {
    Log(CommOp::kBarrier, 0, DType::kF32);
    return inner_->Barrier();
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    return inner_->Split(color, key, name);
  }
  CommStats Stats() const override { return stats_; }

  // The calls logged since the last Take.
  std::vector<CommCall> Take() { return std::exchange(calls_, {}); }

 private:
  void Log(CommOp op, int64_t count, DType dtype) {
    calls_.push_back({op, count, dtype});
    stats_.Record(op, size(), count * static_cast<int64_t>(DTypeSize(dtype)), false);
  }
  static std::vector<float> Widen(const void* p, int64_t n, DType dtype) {
    std::vector<float> w(n);
    EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(1), w.data(), DType::kF32, p, dtype, n).ok());
    return w;
  }
  static absl::Status Narrow(const std::vector<float>& w, void* p, DType dtype) {
    return kernels::Cast(kernels::KernelContext::Cpu(1), p, dtype, w.data(), DType::kF32,
                         static_cast<int64_t>(w.size()));
  }

  std::unique_ptr<Communicator> inner_;
  std::vector<CommCall> calls_;
  CommStats stats_;
};

// ---------------------------------------------------------------------------
// Host tensors in any compute dtype.

Buffer ToDtype(DType dtype, const std::vector<float>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  Buffer b = Buffer::AllocateZeroed(nullptr, MemoryCategory::kGrads, Device::kCpu, dtype, n).value();
  EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(1), b.data(), dtype, values.data(), DType::kF32, n).ok());
  return b;
}

std::vector<float> ToF32(const void* data, DType dtype, int64_t n) {
  std::vector<float> v(n);
  EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(1), v.data(), DType::kF32, data, dtype, n).ok());
  return v;
}

std::vector<float> ToF32(const Buffer& b) { return ToF32(b.data(), b.dtype(), b.numel()); }

// A global tensor's slice on one tp rank, and back.
std::vector<float> Slice(const ParamSpec& spec, int rank, int tp, const std::vector<float>& global) {
  std::vector<float> local(spec.numel() / (spec.partition.replicated() ? 1 : tp));
  for (const GlobalRun& run : LocalToGlobalRuns(spec, rank, tp)) {
    std::copy_n(global.begin() + run.global_begin, run.length, local.begin() + run.local_begin);
  }
  return local;
}
void Unslice(const ParamSpec& spec, int rank, int tp, const std::vector<float>& local, std::vector<float>* global) {
  for (const GlobalRun& run : LocalToGlobalRuns(spec, rank, tp)) {
    std::copy_n(local.begin() + run.local_begin, run.length, global->begin() + run.global_begin);
  }
}

// max |got − want| / max |want|.
double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale == 0 ? err : err / scale;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---------------------------------------------------------------------------

// What one rank's run produced (tensors widened to f32).
struct RankResult {
  std::vector<float> out;      // forward output: (B,T,C), or the rank's N/tp rows
  std::vector<int64_t> out_shape;
  std::vector<float> grad_in;  // same shape
  std::vector<int64_t> grad_in_shape;
  std::vector<std::vector<float>> grads;  // local gradients, params() order
  std::vector<CommCall> forward_calls, backward_calls, backward_input_calls, backward_weight_calls;
  CommStats forward_stats, backward_stats;
  int64_t saved_bytes = 0;
  int64_t weight_inputs_bytes = 0;
  int64_t activations_after_forward = 0;  // tracker: saved + output
  int64_t workspace_left = 0;             // tracker: after every call
  bool grads_untouched_by_backward_input = true;
  bool complete = false;  // every call succeeded
};

bool AllComplete(const std::vector<RankResult>& rs) {
  return std::all_of(rs.begin(), rs.end(), [](const RankResult& r) { return r.complete; });
}

struct RunOptions {
  int tp = 1;
  bool sp = false;
  DType dtype = DType::kF32;
  bool split = false;  // BackwardInput + BackwardWeight instead of Backward
  bool frozen = false;  // every gradient view null
  bool selective = false;  // UnitContext::selective_checkpoint
  bool keep_gathered = false;  // ParallelContext::keep_gathered_ln_outputs
};

class Gpt2BlockTpTest : public ::testing::Test {
 protected:
  static constexpr int64_t kB = 2, kT = 12;  // N = 24: divisible by 2, 3, 4

  void SetUp() override {
    model_ = BuildGpt2(cfg_).value();
    tokens_.assign(kB * kT, 0);
    targets_.assign(kB * kT, 0);
    batch_ = Gpt2Batch(HostView(tokens_, {kB, kT}), HostView(targets_, {kB, kT}));
    // Parameters well away from init (every path carries signal), initial
    // gradient accumulators non-zero (only this call's contribution may be
    // reduced over tp), input and output gradient.
    for (const ParamSpec& spec : block().params()) {
      const bool ln_weight = spec.init == InitKind::kOnes;
      const float stddev = ln_weight ? 0.2f : spec.shape.size() == 1 ? 0.2f : 0.15f;
      params_.push_back(testing::RandomFloats(rng_, spec.numel(), stddev, ln_weight ? 1.0f : 0.0f));
      grads0_.push_back(testing::RandomFloats(rng_, spec.numel(), 0.1f));
    }
    x_ = testing::RandomFloats(rng_, kB * kT * C(), 1.0f);
    dy_ = testing::RandomFloats(rng_, kB * kT * C(), 1.0f);
  }

  const Unit& block() const { return *model_->units[1]; }
  int64_t C() const { return cfg_.n_embd; }
  int64_t N() const { return kB * kT; }

  // Rank `rank` of `o.tp` (comm null at tp 1).
  RankResult RunRank(const RunOptions& o, int rank, CountingCommunicator* comm) {
    RankResult r;
    MemoryTracker tracker;
    UnitContext uctx;
    uctx.compute.compute_dtype = o.dtype;
    uctx.compute.tracker = &tracker;
    uctx.compute.kernels = kernels::KernelContext::Cpu(1);
    uctx.parallel.tp = comm;
    uctx.parallel.tp_rank = rank;
    uctx.parallel.tp_size = o.tp;
    uctx.parallel.sequence_parallel = o.sp;
    uctx.parallel.keep_gathered_ln_outputs = o.keep_gathered;
    uctx.selective_checkpoint = o.selective;
    const std::vector<ParamSpec>& specs = block().params();
    std::vector<Buffer> p, g;
    std::vector<TensorView> pv, gv;
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::vector<int64_t> shape = LocalShape(specs[i], o.tp).value();
      p.push_back(ToDtype(o.dtype, Slice(specs[i], rank, o.tp, params_[i])));
      g.push_back(ToDtype(o.dtype, Slice(specs[i], rank, o.tp, grads0_[i])));
      pv.push_back(ViewOf(p.back(), shape));
      gv.push_back(ViewOf(g.back(), shape));
      if (o.frozen) gv.back().data = nullptr;
    }
    const int64_t rows = o.sp ? N() / o.tp : N();
    const std::vector<int64_t> act_shape = o.sp ? std::vector<int64_t>{rows, C()} : std::vector<int64_t>{kB, kT, C()};
    const int64_t first = o.sp ? rank * rows * C() : 0;
    Buffer in = ToDtype(o.dtype, std::vector<float>(x_.begin() + first, x_.begin() + first + rows * C()));
    Buffer dout = ToDtype(o.dtype, std::vector<float>(dy_.begin() + first, dy_.begin() + first + rows * C()));
    const std::vector<TensorView> ins = {ViewOf(in, act_shape)};
    const std::vector<TensorView> grad_outs = {ViewOf(dout, act_shape)};

    UnitOutput out;
    std::unique_ptr<SavedActivations> saved;
    const CommStats before = comm ? comm->Stats() : CommStats{};
    absl::Status s = block().Forward(uctx, pv, batch_, ins, &out, &saved);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return r;
    if (comm) r.forward_calls = comm->Take();
    const CommStats mid = comm ? comm->Stats() : CommStats{};
    r.forward_stats = mid - before;
    r.saved_bytes = saved->bytes();
    r.activations_after_forward = tracker.Usage(MemoryCategory::kActivations).current;
    r.workspace_left = tracker.Usage(MemoryCategory::kWorkspace).current;
    r.out = ToF32(out.activations.buffer(0));
    r.out_shape = out.activations.shape(0);

    ActivationPack grad_in;
    if (o.split) {
      std::unique_ptr<SavedActivations> wi;
      s = block().BackwardInput(uctx, pv, batch_, *saved, grad_outs, &grad_in, &wi);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) return r;
      if (comm) r.backward_input_calls = comm->Take();
      r.weight_inputs_bytes = wi->bytes();
      for (size_t i = 0; i < g.size(); ++i) {
        r.grads_untouched_by_backward_input &= SameBits(ToF32(g[i]), ToF32(ToDtype(o.dtype, Slice(specs[i], rank, o.tp, grads0_[i]))));
      }
      r.workspace_left += tracker.Usage(MemoryCategory::kWorkspace).current;
      s = block().BackwardWeight(uctx, gv, batch_, *saved, *wi);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) return r;
      if (comm) r.backward_weight_calls = comm->Take();
    } else {
      s = block().Backward(uctx, pv, gv, batch_, *saved, grad_outs, &grad_in);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) return r;
      if (comm) r.backward_calls = comm->Take();
    }
    r.backward_stats = (comm ? comm->Stats() : CommStats{}) - mid;
    r.workspace_left += tracker.Usage(MemoryCategory::kWorkspace).current;
    r.grad_in = ToF32(grad_in.buffer(0));
    r.grad_in_shape = grad_in.shape(0);
    for (const Buffer& b : g) r.grads.push_back(ToF32(b));
    r.complete = true;
    return r;
  }

  // Every rank of o.tp, one thread each.
  std::vector<RankResult> Run(const RunOptions& o) {
    std::vector<RankResult> results(o.tp);
    if (o.tp == 1) {
      results[0] = RunRank(o, 0, nullptr);
      return results;
    }
    std::vector<std::unique_ptr<CountingCommunicator>> comms;
    for (auto& c : CreateThreadGroup(o.tp, "tp")) comms.push_back(std::make_unique<CountingCommunicator>(std::move(c)));
    std::vector<std::thread> threads;
    for (int r = 0; r < o.tp; ++r) threads.emplace_back([&, r] { results[r] = RunRank(o, r, comms[r].get()); });
    for (std::thread& t : threads) t.join();
    return results;
  }

  // The ranks' activations (output or input gradient) as one (N, C) tensor.
  std::vector<float> Assembled(const std::vector<RankResult>& rs, bool sp, bool grad_in) {
    if (!sp) return grad_in ? rs[0].grad_in : rs[0].out;
    std::vector<float> all;
    for (const RankResult& r : rs) {
      const std::vector<float>& v = grad_in ? r.grad_in : r.out;
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
  // Parameter i's gradient as one global tensor (replicated: rank 0's).
  std::vector<float> AssembledGrad(const std::vector<RankResult>& rs, int tp, size_t i) {
    const ParamSpec& spec = block().params()[i];
    std::vector<float> global(spec.numel());
    for (int r = 0; r < tp; ++r) Unslice(spec, r, tp, rs[r].grads[i], &global);
    if (spec.partition.replicated()) global = rs[0].grads[i];
    return global;
  }

  // Checks tp ranks against the tp-1 reference, every tensor's
  // max |got − want| / max |want| within tol; returns the largest seen
  // (printed for the record).
  double ExpectMatchesReference(const RunOptions& o, double tol) {
    SCOPED_TRACE(::testing::Message() << "tp " << o.tp << (o.sp ? " sp" : "") << " " << DTypeName(o.dtype)
                                      << (o.split ? " split" : ""));
    RunOptions ref_o;
    ref_o.dtype = o.dtype;
    const std::vector<RankResult> ref = Run(ref_o);
    const std::vector<RankResult> rs = Run(o);
    if (!AllComplete(ref) || !AllComplete(rs)) return 0;  // the failed call is reported
    const int64_t rows = o.sp ? N() / o.tp : N();
    double worst = 0;
    for (int r = 0; r < o.tp; ++r) {
      const std::vector<int64_t> want = o.sp ? std::vector<int64_t>{rows, C()} : std::vector<int64_t>{kB, kT, C()};
      EXPECT_EQ(rs[r].out_shape, want) << "rank " << r;
      EXPECT_EQ(rs[r].grad_in_shape, want) << "rank " << r;
      if (!o.sp && r > 0) {
        EXPECT_TRUE(SameBits(rs[r].out, rs[0].out)) << "output differs on rank " << r;
        EXPECT_TRUE(SameBits(rs[r].grad_in, rs[0].grad_in)) << "input grad differs on rank " << r;
      }
    }
    const double out_err = RelErr(Assembled(rs, o.sp, false), ref[0].out);
    const double in_err = RelErr(Assembled(rs, o.sp, true), ref[0].grad_in);
    EXPECT_LE(out_err, tol) << "forward output";
    EXPECT_LE(in_err, tol) << "input grad";
    worst = std::max({worst, out_err, in_err});
    for (size_t i = 0; i < block().params().size(); ++i) {
      const ParamSpec& spec = block().params()[i];
      // The accumulators started from grads0_: compare the contributions.
      std::vector<float> got = AssembledGrad(rs, o.tp, i), want = ref[0].grads[i];
      const std::vector<float> g0 = ToF32(ToDtype(o.dtype, grads0_[i]));
      for (size_t k = 0; k < got.size(); ++k) {
        got[k] -= g0[k];
        want[k] -= g0[k];
      }
      const double err = RelErr(got, want);
      EXPECT_LE(err, tol) << spec.name << " gradient";
      worst = std::max(worst, err);
      if (spec.partition.replicated()) {
        for (int r = 1; r < o.tp; ++r) {
          EXPECT_TRUE(SameBits(rs[r].grads[i], rs[0].grads[i])) << spec.name << " gradient differs on rank " << r;
        }
      }
    }
    std::printf("tp %d%s %s%s: max relative error %.3g\n", o.tp, o.sp ? " sp" : "", DTypeName(o.dtype),
                o.split ? " split" : "", worst);
    return worst;
  }

  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::mt19937 rng_{seed_};
  const Gpt2Config cfg_{2, 12, 48, 64, 16, /*vocab_multiple=*/12};  // the vocabulary splits at tp 2, 3, 4
  std::unique_ptr<Model> model_;
  std::vector<int32_t> tokens_, targets_;
  Batch batch_;
  std::vector<std::vector<float>> params_, grads0_;
  std::vector<float> x_, dy_;
};

TEST_F(Gpt2BlockTpTest, PartitionsAreMegatrons) {
  std::vector<std::string> split;
  for (const ParamSpec& spec : block().params()) {
    if (!spec.partition.replicated()) split.push_back(spec.name + " " + spec.partition.DebugString());
  }
  EXPECT_EQ(split, (std::vector<std::string>{
                       "h.0.attn.c_attn.weight split(dim=1, blocks=3)", "h.0.attn.c_attn.bias split(dim=0, blocks=3)",
                       "h.0.attn.c_proj.weight split(dim=0, blocks=1)", "h.0.mlp.c_fc.weight split(dim=1, blocks=1)",
                       "h.0.mlp.c_fc.bias split(dim=0, blocks=1)", "h.0.mlp.c_proj.weight split(dim=0, blocks=1)"}));
  for (int tp : {2, 3, 4}) EXPECT_TRUE(model_->Validate(tp).ok()) << tp;
  EXPECT_FALSE(model_->Validate(5).ok());
  // c_attn.weight [C, 3C] at tp 3: row i of rank r holds q, k and v columns
  // [r·C/3, (r+1)·C/3) of that row, in that order (whole heads).
  const ParamSpec& w = block().params()[2];
  const int64_t c = C(), lc = c / 3;
  for (int r = 0; r < 3; ++r) {
    const std::vector<GlobalRun> runs = LocalToGlobalRuns(w, r, 3);
    ASSERT_EQ(runs.size(), static_cast<size_t>(3 * c));
    for (int64_t i = 0; i < c; ++i) {
      for (int64_t k = 0; k < 3; ++k) {
        EXPECT_EQ(runs[3 * i + k], (GlobalRun{i * 3 * lc + k * lc, i * 3 * c + k * c + r * lc, lc}));
      }
    }
  }
  // c_attn.bias [3C]: q, k, v slices r.
  const std::vector<GlobalRun> bias_runs = LocalToGlobalRuns(block().params()[3], 1, 3);
  EXPECT_EQ(bias_runs, (std::vector<GlobalRun>{{0, lc, lc}, {lc, c + lc, lc}, {2 * lc, 2 * c + lc, lc}}));
}

// f32: the same terms summed in another order (each rank's partial sums over
// its slice, then the tp reduction) and attention over fewer heads per call;
// 1e-5 of the largest element is ~170·2^-24, far above the reordering
// (thousands of seeds: at most 8e-7), far below a wrong slice, a missing
// reduction or a bias added twice (order 1).
TEST_F(Gpt2BlockTpTest, MatchesUnsplitBlockF32) {
  for (int tp : {2, 3, 4}) {
    for (bool sp : {false, true}) {
      RunOptions o;
      o.tp = tp;
      o.sp = sp;
      ExpectMatchesReference(o, 1e-5);
    }
  }
}

TEST_F(Gpt2BlockTpTest, SplitBackwardMatchesReferenceF32) {
  for (bool sp : {false, true}) {
    RunOptions o;
    o.tp = 3;
    o.sp = sp;
    o.split = true;
    ExpectMatchesReference(o, 1e-5);
  }
}

// bf16 keeps 8 significant bits: the tp block rounds each rank's partial
// product and each collective's result where tp 1 rounds once, so elements
// differ by an ulp or so (up to 2^-7 of their magnitude), carried through
// two LayerNorms and the backward. 3e-2 of the largest element is four such
// ulps of it; thousands of seeds gave at most 2.1e-2.
TEST_F(Gpt2BlockTpTest, MatchesUnsplitBlockBf16) {
  for (int tp : {2, 3, 4}) {
    for (bool sp : {false, true}) {
      RunOptions o;
      o.tp = tp;
      o.sp = sp;
      o.dtype = DType::kBF16;
      ExpectMatchesReference(o, 3e-2);
    }
  }
}

// Backward against BackwardInput + BackwardWeight at tp 2: bitwise.
TEST_F(Gpt2BlockTpTest, SplitBackwardIsBitwiseBackward) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (bool sp : {false, true}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dt) << (sp ? " sp" : ""));
      RunOptions o;
      o.tp = 2;
      o.sp = sp;
      o.dtype = dt;
      const std::vector<RankResult> fused = Run(o);
      o.split = true;
      const std::vector<RankResult> split = Run(o);
      ASSERT_TRUE(AllComplete(fused) && AllComplete(split));
      for (int r = 0; r < 2; ++r) {
        EXPECT_TRUE(split[r].grads_untouched_by_backward_input) << "rank " << r;
        EXPECT_TRUE(SameBits(split[r].grad_in, fused[r].grad_in)) << "rank " << r << " input grad";
        for (size_t i = 0; i < block().params().size(); ++i) {
          EXPECT_TRUE(SameBits(split[r].grads[i], fused[r].grads[i]))
              << "rank " << r << " " << block().params()[i].name;
        }
        EXPECT_EQ(split[r].workspace_left, 0);
        // What B keeps for W: (4 + 7/tp)·N·C elements, (2 + 9/tp)·N·C with
        // sequence parallelism (dy and dres2 kept gathered).
        const int64_t e = static_cast<int64_t>(DTypeSize(dt)), n = N(), c = C(), tp = 2;
        const int64_t want = sp ? (2 * n * c + 9 * n * c / tp) * e : (4 * n * c + 7 * n * c / tp) * e;
        EXPECT_EQ(split[r].weight_inputs_bytes, want);
      }
    }
  }
}

// Selective checkpointing at tp 2, with and without sequence parallelism,
// fused and split backward: the output, input gradient and every gradient
// bitwise those of a full save, the same collectives, no workspace left, and
// ln_1, ln_2 (nl rows each) and GELU (N·4C/tp) not kept.
TEST_F(Gpt2BlockTpTest, SelectiveCheckpointingIsBitwiseAFullSave) {
  for (bool sp : {false, true}) {
    for (bool split : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (sp ? "sp" : "no sp") << (split ? " split" : " fused"));
      RunOptions o;
      o.tp = 2;
      o.sp = sp;
      o.split = split;
      const std::vector<RankResult> full = Run(o);
      o.selective = true;
      const std::vector<RankResult> sel = Run(o);
      ASSERT_TRUE(AllComplete(full) && AllComplete(sel));
      const int64_t e = 4, n = N(), c = C(), tp = 2, nl = sp ? n / tp : n;
      for (int r = 0; r < 2; ++r) {
        EXPECT_TRUE(SameBits(sel[r].out, full[r].out)) << "rank " << r << " output";
        EXPECT_TRUE(SameBits(sel[r].grad_in, full[r].grad_in)) << "rank " << r << " input grad";
        for (size_t i = 0; i < block().params().size(); ++i) {
          EXPECT_TRUE(SameBits(sel[r].grads[i], full[r].grads[i])) << "rank " << r << " " << block().params()[i].name;
        }
        for (const auto& [a, b] : {std::pair{sel[r].forward_stats.Total(), full[r].forward_stats.Total()},
                                   std::pair{sel[r].backward_stats.Total(), full[r].backward_stats.Total()}}) {
          EXPECT_EQ(a.calls, b.calls) << "rank " << r;
          EXPECT_EQ(a.bytes_sent, b.bytes_sent) << "rank " << r;
        }
        EXPECT_EQ(sel[r].workspace_left, 0) << "rank " << r;
        EXPECT_EQ(full[r].saved_bytes - sel[r].saved_bytes, (2 * nl * c + 4 * n * c / tp) * e) << "rank " << r;
      }
    }
  }
}

// Sequence parallelism keeping the gathered LayerNorm outputs, at tp 2 and
// 3, fused and split backward, f32 and bf16: output, input gradient and
// every gradient bitwise those of the regathering block; the backward
// without the two ln_1/ln_2 output all-gathers (2·(tp−1)·N·C/tp·e bytes
// fewer); the saved bytes up by the two outputs' other ranks' rows,
// 2·(N − N/tp)·C·e, all counted as activations; no workspace left.
TEST_F(Gpt2BlockTpTest, KeptGatheredLayerNormOutputsSkipTheRegatherBitwise) {
  const int64_t n = N(), c = C();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t e = static_cast<int64_t>(DTypeSize(dt));
    for (int tp : {2, 3}) {
      for (bool split : {false, true}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " tp " << tp << (split ? " split" : " fused"));
        const CommCall ag{CommOp::kAllGather, n * c / tp, dt};
        const CommCall rs{CommOp::kReduceScatter, n * c / tp, dt};
        const CommCall ar_ln{CommOp::kAllReduce, 4 * c, dt};
        RunOptions o;
        o.tp = tp;
        o.sp = true;
        o.split = split;
        o.dtype = dt;
        const std::vector<RankResult> regathered = Run(o);
        o.keep_gathered = true;
        const std::vector<RankResult> kept = Run(o);
        ASSERT_TRUE(AllComplete(regathered) && AllComplete(kept));
        for (int r = 0; r < tp; ++r) {
          EXPECT_TRUE(SameBits(kept[r].out, regathered[r].out)) << "rank " << r << " output";
          EXPECT_TRUE(SameBits(kept[r].grad_in, regathered[r].grad_in)) << "rank " << r << " input grad";
          for (size_t i = 0; i < block().params().size(); ++i) {
            EXPECT_TRUE(SameBits(kept[r].grads[i], regathered[r].grads[i]))
                << "rank " << r << " " << block().params()[i].name;
          }
          EXPECT_EQ(kept[r].forward_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
          if (split) {
            EXPECT_EQ(kept[r].backward_input_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
            EXPECT_EQ(kept[r].backward_weight_calls, (std::vector<CommCall>{ar_ln}));
          } else {
            EXPECT_EQ(kept[r].backward_calls, (std::vector<CommCall>{ag, rs, ag, rs, ar_ln}));
          }
          EXPECT_EQ(regathered[r].backward_stats.Total().bytes_sent - kept[r].backward_stats.Total().bytes_sent,
                    2 * (tp - 1) * (n * c / tp) * e);
          EXPECT_EQ(kept[r].saved_bytes - regathered[r].saved_bytes, 2 * (n - n / tp) * c * e);
          EXPECT_EQ(kept[r].activations_after_forward, kept[r].saved_bytes + (n / tp) * c * e);  // + the output
          EXPECT_EQ(kept[r].workspace_left, 0) << "rank " << r;
        }
      }
    }
  }
}

// The collectives of each call, exactly (formulas in the file comment), in
// the compute dtype: a bf16 block moves half the bytes.
TEST_F(Gpt2BlockTpTest, CollectivesPerCall) {
  const int64_t n = N(), c = C();
  for (DType f : {DType::kF32, DType::kBF16}) {
    const int64_t e = static_cast<int64_t>(DTypeSize(f));
    for (int tp : {2, 3, 4}) {
      for (bool split : {false, true}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(f) << " tp " << tp << (split ? " split" : ""));
        const CommCall ar{CommOp::kAllReduce, n * c, f};
        const CommCall ag{CommOp::kAllGather, n * c / tp, f};
        const CommCall rs{CommOp::kReduceScatter, n * c / tp, f};
        const CommCall ar_ln{CommOp::kAllReduce, 4 * c, f};
        RunOptions o;
        o.tp = tp;
        o.split = split;
        o.dtype = f;
        for (const RankResult& r : Run(o)) {
          EXPECT_EQ(r.forward_calls, (std::vector<CommCall>{ar, ar}));
          if (split) {
            EXPECT_EQ(r.backward_input_calls, (std::vector<CommCall>{ar, ar}));
            EXPECT_TRUE(r.backward_weight_calls.empty());
          } else {
            EXPECT_EQ(r.backward_calls, (std::vector<CommCall>{ar, ar}));
          }
          // Two ring all-reduces of N·C each way: 2·2(tp−1)/tp·N·C·e.
          EXPECT_EQ(r.forward_stats.Total().bytes_sent, 2 * (2 * (tp - 1) * n * c * e / tp));
          EXPECT_EQ(r.backward_stats.Total().bytes_sent, 2 * (2 * (tp - 1) * n * c * e / tp));
        }
        o.sp = true;
        for (const RankResult& r : Run(o)) {
          EXPECT_EQ(r.forward_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
          if (split) {
            EXPECT_EQ(r.backward_input_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
            EXPECT_EQ(r.backward_weight_calls, (std::vector<CommCall>{ag, ag, ar_ln}));
          } else {
            EXPECT_EQ(r.backward_calls, (std::vector<CommCall>{ag, ag, rs, ag, ag, rs, ar_ln}));
          }
          // Forward: 4·(tp−1)·(N·C/tp)·e, the volume of the two all-reduces
          // it replaces.
          EXPECT_EQ(r.forward_stats.Total().bytes_sent, 4 * (tp - 1) * (n * c / tp) * e);
          // Backward: six gathers/scatters of N·C/tp and the 4C all-reduce.
          EXPECT_EQ(r.backward_stats.Total().bytes_sent,
                    6 * (tp - 1) * (n * c / tp) * e + 2 * (tp - 1) * 4 * c * e / tp);
        }
      }
    }
  }
}

// Frozen parameters (null gradient views): the same input gradient, no
// gathers of ln_1's and ln_2's outputs and no LayerNorm all-reduce.
TEST_F(Gpt2BlockTpTest, FrozenParametersSkipTheirCollectives) {
  const int64_t n = N(), c = C(), tp = 2;
  const CommCall ag{CommOp::kAllGather, n * c / tp, DType::kF32};
  const CommCall rs{CommOp::kReduceScatter, n * c / tp, DType::kF32};
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split" : "fused");
    RunOptions o;
    o.tp = tp;
    o.sp = true;
    o.split = split;
    const std::vector<RankResult> trained = Run(o);
    o.frozen = true;
    const std::vector<RankResult> frozen = Run(o);
    ASSERT_TRUE(AllComplete(trained) && AllComplete(frozen));
    for (int r = 0; r < tp; ++r) {
      EXPECT_TRUE(SameBits(frozen[r].grad_in, trained[r].grad_in)) << "rank " << r;
      if (split) {
        EXPECT_EQ(frozen[r].backward_input_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
        EXPECT_TRUE(frozen[r].backward_weight_calls.empty());
      } else {
        EXPECT_EQ(frozen[r].backward_calls, (std::vector<CommCall>{ag, rs, ag, rs}));
      }
    }
  }
}

// Saved activations: the LayerNorm/residual region (x, ln_1 out, res2,
// ln_2 out: 4·rows·C elements; four f32 statistics of rows) holds N rows
// without sequence parallelism and N/tp with it; the tensor-parallel region
// (qkv, attention out, c_fc out and GELU out: 12·N·C/tp elements; the f32
// attention log-sum-exp B·(NH/tp)·T) is the same either way.
TEST_F(Gpt2BlockTpTest, SavedActivationBytes) {
  const int64_t n = N(), c = C(), nh = cfg_.n_head;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const int64_t e = static_cast<int64_t>(DTypeSize(dt));
    for (int tp : {1, 2, 3, 4}) {
      for (bool sp : {false, true}) {
        if (tp == 1 && sp) continue;
        SCOPED_TRACE(::testing::Message() << DTypeName(dt) << " tp " << tp << (sp ? " sp" : ""));
        RunOptions o;
        o.tp = tp;
        o.sp = sp;
        o.dtype = dt;
        const int64_t rows = sp ? n / tp : n;
        const int64_t ln_region = 4 * rows * c * e + 4 * rows * 4;
        const int64_t tp_region = 12 * n * c / tp * e + kB * (nh / tp) * kT * 4;
        for (const RankResult& r : Run(o)) {
          EXPECT_EQ(r.saved_bytes, ln_region + tp_region);
          EXPECT_EQ(r.activations_after_forward, r.saved_bytes + rows * c * e);  // + the output
          EXPECT_EQ(r.workspace_left, 0);
        }
        if (sp) {
          // The saving: (1 − 1/tp)·(4·N·C·e + 16·N) bytes.
          o.sp = false;
          const int64_t without = Run(o)[0].saved_bytes;
          EXPECT_EQ(without - (ln_region + tp_region), (tp - 1) * (4 * n * c * e + 16 * n) / tp);
        }
      }
    }
  }
}

// Errors name the unit: heads that do not split, rows that do not split,
// a backward in another group than its forward.
TEST_F(Gpt2BlockTpTest, RejectsLayoutsThatDoNotSplit) {
  auto one_rank_of = [&](int tp, bool sp, int64_t b, int64_t t) {
    std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(tp, "tp");
    UnitContext uctx;
    uctx.parallel = {comms[0].get(), 0, tp, sp};
    std::vector<Buffer> p;
    std::vector<TensorView> pv;
    for (const ParamSpec& spec : block().params()) {
      absl::StatusOr<std::vector<int64_t>> shape = LocalShape(spec, tp);
      const std::vector<int64_t> s = shape.ok() ? *shape : spec.shape;
      int64_t numel = 1;
      for (int64_t d : s) numel *= d;
      p.push_back(ToDtype(DType::kF32, std::vector<float>(numel, 0.0f)));
      pv.push_back(ViewOf(p.back(), s));
    }
    std::vector<int32_t> tok(b * t, 0);
    const Batch batch = Gpt2Batch(HostView(tok, {b, t}), HostView(tok, {b, t}));
    std::vector<float> x(b * t * C(), 0.0f);
    const std::vector<int64_t> shape = sp ? std::vector<int64_t>{b * t, C()} : std::vector<int64_t>{b, t, C()};
    UnitOutput out;
    std::unique_ptr<SavedActivations> saved;
    return block().Forward(uctx, pv, batch, {HostView(x, shape)}, &out, &saved);
  };
  absl::Status s = one_rank_of(5, false, kB, kT);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0: n_head 12 does not split over tp 5 (whole heads per rank)");
  s = one_rank_of(2, true, 1, 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0 sequence-parallel input: 5 rows do not split evenly over tp 2");

  // Forward at tp 1, backward claiming tp 2.
  UnitContext uctx;
  std::vector<Buffer> p;
  std::vector<TensorView> pv;
  for (const ParamSpec& spec : block().params()) {
    p.push_back(ToDtype(DType::kF32, std::vector<float>(spec.numel(), 0.1f)));
    pv.push_back(ViewOf(p.back(), spec.shape));
  }
  std::vector<float> x(N() * C(), 0.5f);
  UnitOutput out;
  std::unique_ptr<SavedActivations> saved;
  ASSERT_TRUE(block().Forward(uctx, pv, batch_, {HostView(x, {kB, kT, C()})}, &out, &saved).ok());
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2, "tp");
  uctx.parallel = {comms[0].get(), 0, 2, false};
  ActivationPack grad_in;
  s = block().Backward(uctx, pv, pv, batch_, *saved, {HostView(x, {kB, kT, C()})}, &grad_in);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "h.0: backward at tp 2 (rank 0) but the saved forward ran at tp 1 (rank 0)");
}

}  // namespace
}  // namespace zeroshard
