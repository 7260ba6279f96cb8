// GPT-2's embed and head units vocabulary-parallel (docs/model.md, "Tensor
// parallelism"): tp 2, 3 and 4 ranks as threads of one process
// (CreateThreadGroup), each given its slice of the same global parameters
// (LocalToGlobalRuns), against the unsplit units at tp 1 on the same batch.
// The vocabulary (67) is not a multiple of tp, so the last rank holds
// padding rows; they hold garbage here (the engine keeps them zero) to show
// they are never looked up and never predicted, and their gradient must come
// out exactly 0. Some targets are masked (-1).
//
// Checked per (tp, sequence parallelism): the embed output, embed's wte
// gradient and wpe's gradient bitwise (one rank contributes each row, sums
// in the same order); the loss sum (1e-5 relative) and weight (exact);
// d(head input), ln_f's gradients and head's wte gradient assembled from the
// ranks within |got - want| <= 1e-5·(|want| + max|want|). Replicated
// gradients and the loss are bitwise equal on every rank; padding rows'
// gradients exactly 0; the exact tp collectives of every call. Split
// backward equals Backward bitwise at tp 2 (f32, bf16); bf16 at tp 2 against
// bf16 at tp 1 loosely.
//
// Tolerances. In f32 the split changes only the order of sums: the softmax
// denominator is tp partial f64 sums rounded to f32 and then added, and
// d(ln_f out) (hence d(head input) and ln_f's gradients) sums tp GEMM
// partials over the vocabulary. Each moves a result by a few f32 roundings
// (2^-24 relative) of partial sums no larger than the tensor's largest
// element, hence a bound relative to max|want|: measured at most 8.1e-7 of
// it over 230 seeded runs, more than 10x under 1e-5. In bf16 both sides
// round to bf16 (2^-8) at different points (tp 2 rounds each rank's partial
// before the reduction): measured at most 1.4e-2 of max|want| against
// 2e-2·|want| + 4e-2·max|want|.
//
// Collectives per call, N = B·T rows, C channels, tp ranks, elements per
// rank (AllGather: each rank's input; ReduceScatter: each rank's output),
// dt the compute dtype:
//   embed Forward     no SP: AllReduce(sum) N·C dt
//                     SP:    ReduceScatter N/tp·C dt
//   embed Backward    no SP: none
//                     SP:    AllGather N/tp·C dt
//     BackwardInput   none;  BackwardWeight: as Backward
//   head Forward      [SP: AllGather N/tp·C dt (ln_f's output)], then
//                     AllReduce(max) N f32, AllReduce(sum) 2N f32
//   head Backward     no SP: AllReduce(sum) N·C dt
//                     SP:    ReduceScatter N/tp·C dt, AllReduce(sum) 2C dt
//     BackwardInput   no SP: AllReduce(sum) N·C dt; SP: ReduceScatter N/tp·C dt
//     BackwardWeight  no SP: none;                  SP: AllReduce(sum) 2C dt
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cast.h"
#include "kernels/context.h"
#include "models/gpt2/gpt2.h"
#include "nn/testing/grad_check.h"
#include "sharding/testing/thread_communicator.h"

namespace zeroshard {
namespace {

// ---------------------------------------------------------------------------
// A communicator that logs every call and reduces f16/bf16 through f32 (as
// the MPI backend stages them; the thread communicator reduces f32 only).

struct Call {
  CommOp op;
  ReduceOp reduce;  // kSum unless an AllReduce(max)
  int64_t count;
  DType dtype;
  bool operator==(const Call& o) const {
    return op == o.op && reduce == o.reduce && count == o.count && dtype == o.dtype;
  }
};

std::ostream& operator<<(std::ostream& os, const Call& c) {
  os << CommOpName(c.op);
  if (c.op == CommOp::kAllReduce) os << "(" << ReduceOpName(c.reduce) << ")";
  return os << " " << c.count << " " << DTypeName(c.dtype);
}

class DoneWork : public Work {
 public:
  explicit DoneWork(absl::Status s) : status_(std::move(s)) {}
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

bool IsHalf(DType d) { return d == DType::kBF16 || d == DType::kF16; }

std::vector<float> ToF32(const void* p, DType dtype, int64_t n) {
  std::vector<float> out(n);
  EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(1), out.data(), DType::kF32, p, dtype, n).ok());
  return out;
}

void FromF32(const std::vector<float>& v, void* p, DType dtype) {
  EXPECT_TRUE(kernels::Cast(kernels::KernelContext::Cpu(1), p, dtype, v.data(), DType::kF32,
                            static_cast<int64_t>(v.size()))
                  .ok());
}

class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }

  std::unique_ptr<Work> AllGather(const void* in, void* out, int64_t count, DType dtype) override {
    calls_.push_back({CommOp::kAllGather, ReduceOp::kSum, count, dtype});
    return inner_->AllGather(in, out, count, dtype);
  }
  std::unique_ptr<Work> AllToAll(const void* in, void* out, int64_t count, DType dtype) override {
    calls_.push_back({CommOp::kAllToAll, ReduceOp::kSum, count, dtype});
    return inner_->AllToAll(in, out, count, dtype);
  }
  std::unique_ptr<Work> ReduceScatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override {
    calls_.push_back({CommOp::kReduceScatter, op, count, dtype});
    if (!IsHalf(dtype)) return inner_->ReduceScatter(in, out, count, dtype, op);
    std::vector<float> in32 = ToF32(in, dtype, count * size()), out32(count);
    absl::Status s = inner_->ReduceScatter(in32.data(), out32.data(), count, DType::kF32, op)->Wait();
    FromF32(out32, out, dtype);
    return std::make_unique<DoneWork>(s);
  }
  std::unique_ptr<Work> AllReduce(void* buf, int64_t count, DType dtype, ReduceOp op) override {
    calls_.push_back({CommOp::kAllReduce, op, count, dtype});
    if (!IsHalf(dtype)) return inner_->AllReduce(buf, count, dtype, op);
    std::vector<float> buf32 = ToF32(buf, dtype, count);
    absl::Status s = inner_->AllReduce(buf32.data(), count, DType::kF32, op)->Wait();
    FromF32(buf32, buf, dtype);
    return std::make_unique<DoneWork>(s);
  }
  std::unique_ptr<Work> Broadcast(void* buf, int64_t count, DType dtype, int root) override {
    calls_.push_back({CommOp::kBroadcast, ReduceOp::kSum, count, dtype});
    return inner_->Broadcast(buf, count, dtype, root);
  }
  std::unique_ptr<Work> Send(const void* buf, int64_t count, DType dtype, int peer, int tag) override {
    calls_.push_back({CommOp::kSend, ReduceOp::kSum, count, dtype});
    return inner_->Send(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Recv(void* buf, int64_t count, DType dtype, int peer, int tag) override {
    calls_.push_back({CommOp::kRecv, ReduceOp::kSum, count, dtype});
    return inner_->Recv(buf, count, dtype, peer, tag);
  }
  std::unique_ptr<Work> Barrier() override {
    calls_.push_back({CommOp::kBarrier, ReduceOp::kSum, 0, DType::kF32});
    return inner_->Barrier();
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key, const std::string& name) override {
    return inner_->Split(color, key, name);
  }
  CommStats Stats() const override { return inner_->Stats(); }

  // The calls since the last TakeCalls.
  std::vector<Call> TakeCalls() { return std::exchange(calls_, {}); }

 private:
  std::unique_ptr<Communicator> inner_;
  std::vector<Call> calls_;
};

// ---------------------------------------------------------------------------
// One rank's run of embed and head (or the reference's, at tp 1).

constexpr int64_t kB = 2, kT = 6, kN = kB * kT;  // N divisible by 2, 3 and 4
const Gpt2Config kRefConfig{1, 2, 16, 67, 8};    // L, NH, C, V (odd, prime), T_max
constexpr int64_t kC = 16, kV = 67, kMaxT = 8;

// The global inputs every rank is given (f32; rounded to the compute dtype).
struct Globals {
  std::vector<float> wte, wpe, lnw, lnb;  // wte [V, C]: no padding
  std::vector<int32_t> tokens, targets;   // (B, T)
  std::vector<float> x, dy;               // head input, embed output grad (N, C)
  float dloss = 1.0f / kN;
};

Globals MakeGlobals(std::mt19937& rng) {
  Globals g;
  g.wte = testing::RandomFloats(rng, kV * kC, 0.5f);
  g.wpe = testing::RandomFloats(rng, kMaxT * kC, 0.3f);
  g.lnw = testing::RandomFloats(rng, kC, 0.2f, 1.0f);
  g.lnb = testing::RandomFloats(rng, kC, 0.2f);
  g.tokens.resize(kN);
  g.targets.resize(kN);
  for (auto& t : g.tokens) t = static_cast<int32_t>(rng() % kV);
  for (auto& t : g.targets) t = static_cast<int32_t>(rng() % kV);
  g.tokens[1] = kV - 1;  // the last real row, next to the padding
  g.tokens[4] = 0;
  g.targets[0] = kV - 1;
  g.targets[3] = -1;  // masked
  g.targets[kN - 2] = -1;
  g.x = testing::RandomFloats(rng, kN * kC, 1.0f);
  g.dy = testing::RandomFloats(rng, kN * kC, 0.1f);
  return g;
}

struct RankResult {
  absl::Status status;
  std::vector<int64_t> embed_out_shape, dx_shape;
  std::vector<float> embed_out, dx;  // this rank's rows
  LossTerms loss;
  std::vector<float> dwte_head, dwte_embed;  // this rank's rows of the padded wte
  std::vector<float> dwpe, dlnw, dlnb;
  std::vector<Call> embed_fwd, head_fwd, head_bwd_input, head_bwd_weight, embed_bwd_input, embed_bwd_weight;
  int64_t head_weight_inputs_bytes = 0, embed_weight_inputs_bytes = 0;
};

Buffer Host(DType dt, const std::vector<float>& v) {
  Buffer b =
      Buffer::AllocateZeroed(nullptr, MemoryCategory::kParams, Device::kCpu, dt, static_cast<int64_t>(v.size())).value();
  FromF32(v, b.data(), dt);
  return b;
}
std::vector<float> Values(const Buffer& b) { return ToF32(b.data(), b.dtype(), b.numel()); }

// Rows [begin, begin + count) of a row-major (rows, c) vector.
std::vector<float> RowsOf(const std::vector<float>& v, int64_t c, int64_t begin, int64_t count) {
  return std::vector<float>(v.begin() + begin * c, v.begin() + (begin + count) * c);
}

#define RETURN_ON_ERROR(expr)   \
  do {                          \
    absl::Status _s = (expr);   \
    if (!_s.ok()) {             \
      result.status = _s;       \
      return result;            \
    }                           \
  } while (0)

// Forward then backward of embed and head for one rank. `comm` is the
// rank's tp communicator (null at tp 1); `split` runs BackwardInput then
// BackwardWeight instead of Backward.
RankResult RunRank(const Gpt2Config& cfg, DType dt, ParallelContext par, CountingCommunicator* comm,
                   const Globals& g, bool split) {
  RankResult result;
  std::unique_ptr<Model> model = BuildGpt2(cfg).value();
  const Unit& embed = *model->units.front();
  const Unit& head = *model->units.back();
  const ParamSpec& wte_spec = embed.params()[0];
  const int64_t vp = cfg.padded_vocab_size();
  auto calls = [&]() { return comm == nullptr ? std::vector<Call>{} : comm->TakeCalls(); };

  // The padded global wte: padding rows hold garbage (never read).
  std::vector<float> wte_global(vp * kC, 3.0f);
  std::copy(g.wte.begin(), g.wte.end(), wte_global.begin());
  absl::StatusOr<std::vector<int64_t>> local_shape = LocalShape(wte_spec, par.tp_size);
  RETURN_ON_ERROR(local_shape.status());
  std::vector<float> wte_local((*local_shape)[0] * kC);
  for (const GlobalRun& run : LocalToGlobalRuns(wte_spec, par.tp_rank, par.tp_size)) {
    std::copy(wte_global.begin() + run.global_begin, wte_global.begin() + run.global_begin + run.length,
              wte_local.begin() + run.local_begin);
  }
  Buffer wte = Host(dt, wte_local), wpe = Host(dt, g.wpe), lnw = Host(dt, g.lnw), lnb = Host(dt, g.lnb);
  Buffer dwte_embed = Host(dt, std::vector<float>(wte_local.size(), 0.0f));
  Buffer dwte_head = Host(dt, std::vector<float>(wte_local.size(), 0.0f));
  Buffer dwpe = Host(dt, std::vector<float>(g.wpe.size(), 0.0f));
  Buffer dlnw = Host(dt, std::vector<float>(kC, 0.0f)), dlnb = Host(dt, std::vector<float>(kC, 0.0f));
  const TensorView wte_v = ViewOf(wte, *local_shape);
  const std::vector<TensorView> embed_params = {wte_v, ViewOf(wpe, {kMaxT, kC})};
  const std::vector<TensorView> head_params = {ViewOf(lnw, {kC}), ViewOf(lnb, {kC}), wte_v};
  const std::vector<TensorView> embed_grads = {ViewOf(dwte_embed, *local_shape), ViewOf(dwpe, {kMaxT, kC})};
  const std::vector<TensorView> head_grads = {ViewOf(dlnw, {kC}), ViewOf(dlnb, {kC}),
                                              ViewOf(dwte_head, *local_shape)};

  MemoryTracker tracker;
  UnitContext u;
  u.compute.compute_dtype = dt;
  u.compute.tracker = &tracker;
  u.parallel = par;
  std::vector<int32_t> tokens = g.tokens, targets = g.targets;
  const Batch batch = Gpt2Batch(testing::HostView(tokens, {kB, kT}), testing::HostView(targets, {kB, kT}));
  const bool sp = par.sequence_parallel && par.tp_size > 1;
  const int64_t rows = sp ? kN / par.tp_size : kN, row0 = sp ? par.tp_rank * rows : 0;
  const std::vector<int64_t> act_shape = sp ? std::vector<int64_t>{rows, kC} : std::vector<int64_t>{kB, kT, kC};

  // embed forward
  UnitOutput eout;
  std::unique_ptr<SavedActivations> esaved;
  RETURN_ON_ERROR(embed.Forward(u, embed_params, batch, {}, &eout, &esaved));
  result.embed_fwd = calls();
  result.embed_out_shape = eout.activations.shape(0);
  result.embed_out = Values(eout.activations.buffer(0));

  // head forward on its own input (this rank's rows of g.x)
  Buffer x = Host(dt, RowsOf(g.x, kC, row0, rows));
  const std::vector<TensorView> hin = {ViewOf(x, act_shape)};
  UnitOutput hout;
  std::unique_ptr<SavedActivations> hsaved;
  RETURN_ON_ERROR(head.Forward(u, head_params, batch, hin, &hout, &hsaved));
  result.head_fwd = calls();
  result.loss = hout.loss;

  // head backward
  float dsum = g.dloss;
  const std::vector<TensorView> hgrad_out = {TensorView{&dsum, DType::kF32, {1}, Device::kCpu}};
  ActivationPack hgrad_in;
  if (split) {
    std::unique_ptr<SavedActivations> wi;
    RETURN_ON_ERROR(head.BackwardInput(u, head_params, batch, *hsaved, hgrad_out, &hgrad_in, &wi));
    result.head_bwd_input = calls();
    result.head_weight_inputs_bytes = wi->bytes();
    RETURN_ON_ERROR(head.BackwardWeight(u, head_grads, batch, *hsaved, *wi));
    result.head_bwd_weight = calls();
  } else {
    RETURN_ON_ERROR(head.Backward(u, head_params, head_grads, batch, *hsaved, hgrad_out, &hgrad_in));
    result.head_bwd_input = calls();
  }
  result.dx_shape = hgrad_in.shape(0);
  result.dx = Values(hgrad_in.buffer(0));

  // embed backward on its own output grad (this rank's rows of g.dy)
  Buffer dy = Host(dt, RowsOf(g.dy, kC, row0, rows));
  const std::vector<TensorView> egrad_out = {ViewOf(dy, act_shape)};
  ActivationPack egrad_in;
  if (split) {
    std::unique_ptr<SavedActivations> wi;
    RETURN_ON_ERROR(embed.BackwardInput(u, embed_params, batch, *esaved, egrad_out, &egrad_in, &wi));
    result.embed_bwd_input = calls();
    result.embed_weight_inputs_bytes = wi->bytes();
    dy = Host(dt, std::vector<float>(rows * kC, NAN));  // the caller's grad may be gone before W
    RETURN_ON_ERROR(embed.BackwardWeight(u, embed_grads, batch, *esaved, *wi));
    result.embed_bwd_weight = calls();
  } else {
    RETURN_ON_ERROR(embed.Backward(u, embed_params, embed_grads, batch, *esaved, egrad_out, &egrad_in));
    result.embed_bwd_input = calls();
  }
  if (!egrad_in.empty()) result.status = absl::InternalError("embed returned an input gradient");

  result.dwte_head = Values(dwte_head);
  result.dwte_embed = Values(dwte_embed);
  result.dwpe = Values(dwpe);
  result.dlnw = Values(dlnw);
  result.dlnb = Values(dlnb);
  // Everything but the saved activations is released.
  esaved.reset();
  hsaved.reset();
  eout.activations.Clear();
  hgrad_in.Clear();
  if (tracker.Usage(MemoryCategory::kWorkspace).current != 0 ||
      tracker.Usage(MemoryCategory::kActivations).current != 0) {
    result.status = absl::InternalError("memory left allocated");
  }
  return result;
}

// Every rank of a tp group, one thread each.
std::vector<RankResult> RunGroup(const Gpt2Config& cfg, DType dt, int tp, bool sp, const Globals& g, bool split) {
  std::vector<std::unique_ptr<Communicator>> inner = CreateThreadGroup(tp, "tp");
  std::vector<std::unique_ptr<CountingCommunicator>> comms;
  for (auto& c : inner) comms.push_back(std::make_unique<CountingCommunicator>(std::move(c)));
  std::vector<RankResult> results(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r]() {
      ParallelContext par{comms[r].get(), r, tp, sp};
      results[r] = RunRank(cfg, dt, par, comms[r].get(), g, split);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// ---------------------------------------------------------------------------
// Comparisons

// |got - want| <= rtol·|want| + atol_frac·max|want| for every element (the
// absolute part covers elements that are sums cancelling to much less than
// their terms). Raises *worst to the largest |got - want| / max|want|
// (what the tolerances are measured as) and prints it.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol_frac,
                 const std::string& what, double* worst) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_abs = 0, max_err = 0;
  for (float w : want) max_abs = std::max(max_abs, std::fabs(static_cast<double>(w)));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    max_err = std::max(max_err, err);
    if (!(err <= rtol * std::fabs(want[i]) + atol_frac * max_abs) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i] << " (max |expected| "
                    << max_abs << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what;
  std::cout << "[ measured ]   " << what << ": max error / max |expected| = " << max_err / max_abs << "\n";
  *worst = std::max(*worst, max_err / max_abs);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The real rows of wte's gradient, assembled from every rank's local rows;
// padding rows must be exactly 0.
std::vector<float> AssembleWte(const std::vector<RankResult>& ranks, std::vector<float> RankResult::*field,
                               const std::string& what) {
  const int64_t tp = static_cast<int64_t>(ranks.size());
  const int64_t local = static_cast<int64_t>((ranks[0].*field).size()) / kC;
  std::vector<float> all;
  for (const RankResult& r : ranks) all.insert(all.end(), (r.*field).begin(), (r.*field).end());
  EXPECT_EQ(static_cast<int64_t>(all.size()), tp * local * kC);
  for (int64_t i = kV * kC; i < static_cast<int64_t>(all.size()); ++i) {
    EXPECT_EQ(all[i], 0.0f) << what << ": padding element " << i << " has a gradient";
  }
  all.resize(kV * kC);
  return all;
}

std::vector<Call> Calls(std::initializer_list<Call> c) { return c; }

// The collectives each call must issue (the formulas in the file comment).
void ExpectCollectives(const RankResult& r, int tp, bool sp, DType dt, bool split) {
  using O = CommOp;
  const ReduceOp sum = ReduceOp::kSum, max = ReduceOp::kMax;
  const int64_t nc = kN * kC, local_nc = kN / tp * kC;
  if (tp == 1) {
    for (const auto* c : {&r.embed_fwd, &r.head_fwd, &r.head_bwd_input, &r.head_bwd_weight, &r.embed_bwd_input,
                          &r.embed_bwd_weight}) {
      EXPECT_TRUE(c->empty());
    }
    return;
  }
  EXPECT_EQ(r.embed_fwd, sp ? Calls({{O::kReduceScatter, sum, local_nc, dt}}) : Calls({{O::kAllReduce, sum, nc, dt}}));
  std::vector<Call> head_fwd = {{O::kAllReduce, max, kN, DType::kF32}, {O::kAllReduce, sum, 2 * kN, DType::kF32}};
  if (sp) head_fwd.insert(head_fwd.begin(), Call{O::kAllGather, sum, local_nc, dt});
  EXPECT_EQ(r.head_fwd, head_fwd);
  const std::vector<Call> head_b = sp ? Calls({{O::kReduceScatter, sum, local_nc, dt}})
                                      : Calls({{O::kAllReduce, sum, nc, dt}});
  const std::vector<Call> head_w = sp ? Calls({{O::kAllReduce, sum, 2 * kC, dt}}) : Calls({});
  const std::vector<Call> embed_w = sp ? Calls({{O::kAllGather, sum, local_nc, dt}}) : Calls({});
  if (split) {
    EXPECT_EQ(r.head_bwd_input, head_b);
    EXPECT_EQ(r.head_bwd_weight, head_w);
    EXPECT_EQ(r.embed_bwd_input, Calls({}));
    EXPECT_EQ(r.embed_bwd_weight, embed_w);
  } else {
    std::vector<Call> head_bwd = head_b;
    head_bwd.insert(head_bwd.end(), head_w.begin(), head_w.end());
    EXPECT_EQ(r.head_bwd_input, head_bwd);
    EXPECT_EQ(r.embed_bwd_input, embed_w);
  }
}

// ---------------------------------------------------------------------------

class Gpt2VocabTpTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  int tp() const { return std::get<0>(GetParam()); }
  bool sp() const { return std::get<1>(GetParam()); }

  const uint32_t seed_ = testing::TestSeed();
  const ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, ::testing::Message() << "seed " << seed_};
  std::mt19937 rng_{seed_};
  const Globals g_ = MakeGlobals(rng_);
};

// Every rank against the unsplit units, f32.
TEST_P(Gpt2VocabTpTest, MatchesTheUnsplitUnits) {
  const RankResult ref = RunRank(kRefConfig, DType::kF32, ParallelContext{}, nullptr, g_, /*split=*/false);
  ASSERT_TRUE(ref.status.ok()) << ref.status;
  Gpt2Config cfg = kRefConfig;
  cfg.vocab_multiple = tp();
  const std::vector<RankResult> ranks = RunGroup(cfg, DType::kF32, tp(), sp(), g_, /*split=*/false);
  const int64_t rows = sp() ? kN / tp() : kN;
  const std::vector<int64_t> act_shape = sp() ? std::vector<int64_t>{rows, kC} : std::vector<int64_t>{kB, kT, kC};
  double worst = 0;
  for (int r = 0; r < tp(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const RankResult& got = ranks[r];
    ASSERT_TRUE(got.status.ok()) << got.status;
    const int64_t row0 = sp() ? r * rows : 0;
    EXPECT_EQ(got.embed_out_shape, act_shape);
    EXPECT_TRUE(SameBits(got.embed_out, RowsOf(ref.embed_out, kC, row0, rows))) << "embed output";
    EXPECT_NEAR(got.loss.loss.sum, ref.loss.loss.sum, 1e-5 * std::fabs(ref.loss.loss.sum));
    worst = std::max(worst, std::fabs(got.loss.loss.sum - ref.loss.loss.sum) / std::fabs(ref.loss.loss.sum));
    EXPECT_EQ(got.loss.loss.weight, kN - 2);
    EXPECT_EQ(got.dx_shape, act_shape);
    ExpectClose(got.dx, RowsOf(ref.dx, kC, row0, rows), 1e-5, 1e-5, "d(head input)", &worst);
    ExpectClose(got.dlnw, ref.dlnw, 1e-5, 1e-5, "ln_f.weight grad", &worst);
    ExpectClose(got.dlnb, ref.dlnb, 1e-5, 1e-5, "ln_f.bias grad", &worst);
    EXPECT_TRUE(SameBits(got.dwpe, ref.dwpe)) << "wpe.weight grad";
    // Replicated results are bitwise equal on every rank.
    EXPECT_EQ(got.loss.loss.sum, ranks[0].loss.loss.sum);
    EXPECT_TRUE(SameBits(got.dlnw, ranks[0].dlnw)) << "ln_f.weight grad differs from rank 0's";
    EXPECT_TRUE(SameBits(got.dlnb, ranks[0].dlnb)) << "ln_f.bias grad differs from rank 0's";
    EXPECT_TRUE(SameBits(got.dwpe, ranks[0].dwpe)) << "wpe.weight grad differs from rank 0's";
    if (!sp()) {
      EXPECT_TRUE(SameBits(got.dx, ranks[0].dx)) << "d(head input) differs from rank 0's";
    }
    ExpectCollectives(got, tp(), sp(), DType::kF32, /*split=*/false);
  }
  // The embedding's wte gradient: the unsplit one's rows bitwise; the head's
  // to 1e-5 (its logits are a column block of the unsplit GEMM).
  EXPECT_TRUE(SameBits(AssembleWte(ranks, &RankResult::dwte_embed, "embed"), ref.dwte_embed)) << "embed's wte grad";
  ExpectClose(AssembleWte(ranks, &RankResult::dwte_head, "head"), ref.dwte_head, 1e-5, 1e-5, "head's wte grad",
              &worst);
  std::cout << "[ measured ] tp " << tp() << (sp() ? " sp" : "")
            << ": worst error / max |expected| (loss: relative) " << worst << "\n";
}

// At tp 1 a padded vocabulary (vocab_multiple 4) computes the same values
// with no communicator at all.
TEST(Gpt2VocabTp, PaddingAtTpOneMatchesTheUnpaddedModel) {
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const Globals g = MakeGlobals(rng);
  const RankResult ref = RunRank(kRefConfig, DType::kF32, ParallelContext{}, nullptr, g, false);
  Gpt2Config cfg = kRefConfig;
  cfg.vocab_multiple = 4;
  const RankResult got = RunRank(cfg, DType::kF32, ParallelContext{}, nullptr, g, false);
  ASSERT_TRUE(ref.status.ok()) << ref.status;
  ASSERT_TRUE(got.status.ok()) << got.status;
  double worst = 0;
  EXPECT_TRUE(SameBits(got.embed_out, ref.embed_out));
  EXPECT_NEAR(got.loss.loss.sum, ref.loss.loss.sum, 1e-5 * std::fabs(ref.loss.loss.sum));
  EXPECT_EQ(got.loss.loss.weight, ref.loss.loss.weight);
  ExpectClose(got.dx, ref.dx, 1e-5, 1e-5, "d(head input)", &worst);
  ExpectClose(got.dlnw, ref.dlnw, 1e-5, 1e-5, "ln_f.weight grad", &worst);
  EXPECT_TRUE(SameBits(got.dwpe, ref.dwpe));
  EXPECT_TRUE(SameBits(AssembleWte({got}, &RankResult::dwte_embed, "embed"), ref.dwte_embed));
  ExpectClose(AssembleWte({got}, &RankResult::dwte_head, "head"), ref.dwte_head, 1e-5, 1e-5, "head's wte grad",
              &worst);
}

INSTANTIATE_TEST_SUITE_P(TpAndSp, Gpt2VocabTpTest, ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         [](const auto& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp" : "");
                         });

// tp 2: BackwardInput then BackwardWeight give bitwise Backward's results,
// with and without sequence parallelism, f32 and bf16; what B keeps is the
// local dlogits and ln_f's output grad rows (head), the output grad rows
// (embed).
class Gpt2VocabTpSplitTest : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(Gpt2VocabTpSplitTest, SplitBackwardIsBitwiseBackward) {
  const DType dt = std::get<0>(GetParam());
  const bool sp = std::get<1>(GetParam());
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const Globals g = MakeGlobals(rng);
  Gpt2Config cfg = kRefConfig;
  cfg.vocab_multiple = 2;
  const std::vector<RankResult> fused = RunGroup(cfg, dt, 2, sp, g, /*split=*/false);
  const std::vector<RankResult> split = RunGroup(cfg, dt, 2, sp, g, /*split=*/true);
  const int64_t elem = DTypeSize(dt), rows = sp ? kN / 2 : kN, local = 68 / 2;
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ASSERT_TRUE(fused[r].status.ok()) << fused[r].status;
    ASSERT_TRUE(split[r].status.ok()) << split[r].status;
    EXPECT_TRUE(SameBits(split[r].dx, fused[r].dx)) << "d(head input)";
    EXPECT_EQ(split[r].dx_shape, fused[r].dx_shape);
    EXPECT_TRUE(SameBits(split[r].dwte_head, fused[r].dwte_head)) << "head's wte grad";
    EXPECT_TRUE(SameBits(split[r].dwte_embed, fused[r].dwte_embed)) << "embed's wte grad";
    EXPECT_TRUE(SameBits(split[r].dwpe, fused[r].dwpe)) << "wpe grad";
    EXPECT_TRUE(SameBits(split[r].dlnw, fused[r].dlnw)) << "ln_f.weight grad";
    EXPECT_TRUE(SameBits(split[r].dlnb, fused[r].dlnb)) << "ln_f.bias grad";
    EXPECT_EQ(split[r].head_weight_inputs_bytes, (kN * local + rows * kC) * elem);
    EXPECT_EQ(split[r].embed_weight_inputs_bytes, rows * kC * elem);
    ExpectCollectives(fused[r], 2, sp, dt, /*split=*/false);
    ExpectCollectives(split[r], 2, sp, dt, /*split=*/true);
  }
}

INSTANTIATE_TEST_SUITE_P(DtypeAndSp, Gpt2VocabTpSplitTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(DTypeName(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_sp" : "");
                         });

// bf16 at tp 2 against bf16 at tp 1: the embedding exactly, the rest within
// bf16 rounding of the differently ordered sums (|got - want| <= 2e-2·|want|
// + 4e-2·max|want|, loss 1e-2 relative).
class Gpt2VocabTpBf16Test : public ::testing::TestWithParam<bool> {};

TEST_P(Gpt2VocabTpBf16Test, MatchesTheUnsplitUnitsLoosely) {
  const bool sp = GetParam();
  const uint32_t seed = testing::TestSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  const Globals g = MakeGlobals(rng);
  const RankResult ref = RunRank(kRefConfig, DType::kBF16, ParallelContext{}, nullptr, g, false);
  ASSERT_TRUE(ref.status.ok()) << ref.status;
  Gpt2Config cfg = kRefConfig;
  cfg.vocab_multiple = 2;
  const std::vector<RankResult> ranks = RunGroup(cfg, DType::kBF16, 2, sp, g, false);
  const int64_t rows = sp ? kN / 2 : kN;
  double worst = 0;
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ASSERT_TRUE(ranks[r].status.ok()) << ranks[r].status;
    const int64_t row0 = sp ? r * rows : 0;
    EXPECT_TRUE(SameBits(ranks[r].embed_out, RowsOf(ref.embed_out, kC, row0, rows))) << "embed output";
    EXPECT_NEAR(ranks[r].loss.loss.sum, ref.loss.loss.sum, 1e-2 * std::fabs(ref.loss.loss.sum));
    EXPECT_EQ(ranks[r].loss.loss.sum, ranks[0].loss.loss.sum);
    ExpectClose(ranks[r].dx, RowsOf(ref.dx, kC, row0, rows), 2e-2, 4e-2, "d(head input)", &worst);
    ExpectClose(ranks[r].dlnw, ref.dlnw, 2e-2, 4e-2, "ln_f.weight grad", &worst);
    ExpectClose(ranks[r].dlnb, ref.dlnb, 2e-2, 4e-2, "ln_f.bias grad", &worst);
    EXPECT_TRUE(SameBits(ranks[r].dwpe, ref.dwpe)) << "wpe grad";
    EXPECT_TRUE(SameBits(ranks[r].dlnw, ranks[0].dlnw));
    ExpectCollectives(ranks[r], 2, sp, DType::kBF16, false);
  }
  EXPECT_TRUE(SameBits(AssembleWte(ranks, &RankResult::dwte_embed, "embed"), ref.dwte_embed));
  ExpectClose(AssembleWte(ranks, &RankResult::dwte_head, "head"), ref.dwte_head, 2e-2, 4e-2, "head's wte grad",
              &worst);
  std::cout << "[ measured ] bf16 tp 2" << (sp ? " sp" : "")
            << ": worst error / max |expected| (loss: relative) " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Sp, Gpt2VocabTpBf16Test, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "sp" : "no_sp"; });

// Shapes that do not split are rejected before any collective, naming the
// unit.
TEST(Gpt2VocabTp, RowsOrVocabularyThatDoNotSplitAreRejected) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateThreadGroup(2, "tp");
  Gpt2Config cfg = kRefConfig;
  cfg.vocab_multiple = 2;
  std::unique_ptr<Model> model = BuildGpt2(cfg).value();
  const Unit& embed = *model->units.front();
  std::vector<float> wte(34 * kC, 0.0f), wpe(kMaxT * kC, 0.0f);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5}, targets = {1, 2, 3, 4, 5};  // N = 5 rows
  const Batch batch = Gpt2Batch(testing::HostView(tokens, {1, 5}), testing::HostView(targets, {1, 5}));
  UnitContext u;
  u.parallel = ParallelContext{comms[0].get(), 0, 2, /*sequence_parallel=*/true};
  UnitOutput out;
  std::unique_ptr<SavedActivations> saved;
  absl::Status s = embed.Forward(u, {testing::HostView(wte, {34, kC}), testing::HostView(wpe, {kMaxT, kC})}, batch,
                                 {}, &out, &saved);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "embed: sequence parallelism splits the 5 rows (batch x sequence) over tp 2, which does not "
                         "divide them");

  std::unique_ptr<Model> unpadded = BuildGpt2(kRefConfig).value();  // 67 rows over tp 2
  u.parallel.sequence_parallel = false;
  s = unpadded->units.front()->Forward(
      u, {testing::HostView(wte, {33, kC}), testing::HostView(wpe, {kMaxT, kC})}, batch, {}, &out, &saved);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "embed: the padded vocabulary 67 (real 67) does not split over tp 2; set the model's "
                         "vocab_multiple to a multiple of the tp size");
  // A tp group without a communicator.
  u.parallel.tp = nullptr;
  s = embed.Forward(u, {testing::HostView(wte, {34, kC}), testing::HostView(wpe, {kMaxT, kC})}, batch, {}, &out,
                    &saved);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "embed: tp size 2 but no tp communicator");
}

// BuildGpt2 pads wte to a multiple of vocab_multiple and declares the split.
TEST(Gpt2VocabTp, VocabMultiplePadsWteAndDeclaresItsLogicalShape) {
  Gpt2Config cfg = kRefConfig;
  EXPECT_EQ(cfg.padded_vocab_size(), 67);
  cfg.vocab_multiple = 4;
  EXPECT_EQ(cfg.padded_vocab_size(), 68);
  std::unique_ptr<Model> model = BuildGpt2(cfg).value();
  const ParamSpec& wte = model->units.front()->params()[0];
  EXPECT_EQ(wte.shape, (std::vector<int64_t>{68, kC}));
  EXPECT_EQ(wte.logical_shape, (std::vector<int64_t>{67, kC}));
  EXPECT_EQ(wte.partition, Partition::Split(0));
  EXPECT_TRUE(model->Validate(4).ok());
  EXPECT_TRUE(model->Validate(2).ok());
  EXPECT_EQ(model->Validate(3).message(),
            "parameter 'wte.weight' [68, 16] is split on dimension 0 in 1 block(s) over tp 3: 68 is not a multiple "
            "of 3");
  EXPECT_EQ(model->num_params() - model->num_logical_params(), kC);
  EXPECT_TRUE(model->units.front()->params()[1].partition.replicated());  // wpe
  // No padding at vocab_multiple 1 (what tp 1 uses).
  std::unique_ptr<Model> plain = BuildGpt2(kRefConfig).value();
  EXPECT_TRUE(plain->units.front()->params()[0].logical_shape.empty());
  cfg.vocab_multiple = 0;
  EXPECT_EQ(BuildGpt2(cfg).status().message(), "gpt2 vocab_multiple is 0, expected >= 1");
}

}  // namespace
}  // namespace zeroshard
