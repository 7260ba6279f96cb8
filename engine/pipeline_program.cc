#include "engine/pipeline_program.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// The lowest unit that runs backward; units.size() when none does.
int FirstBackwardUnit(const std::vector<ProgramUnit>& units) {
  int first = static_cast<int>(units.size());
  while (first > 0 && units[first - 1].backward) --first;
  return first;
}

absl::Status ValidateChunks(const PipelineProgramInput& in) {
  RETURN_IF_ERROR(ValidatePipelineShape(in.schedule, in.shape));
  const int pp = in.shape.stages, chunks = in.shape.chunks(), n = static_cast<int>(in.units.size());
  if (in.stage < 0 || in.stage >= pp) {
    return Invalid(absl::StrCat("stage is ", in.stage, ", expected in [0, ", pp, ")"));
  }
  if (static_cast<int>(in.chunk_begin.size()) != chunks + 1) {
    return Invalid(absl::StrCat("chunk_begin has ", in.chunk_begin.size(),
                                " entries, expected pp x virtual stages + 1 = ", chunks + 1));
  }
  if (in.chunk_begin.front() != 0) {
    return Invalid(absl::StrCat("chunk_begin[0] is ", in.chunk_begin.front(), ", expected 0"));
  }
  if (in.chunk_begin.back() != n) {
    return Invalid(
        absl::StrCat("chunk_begin[", chunks, "] is ", in.chunk_begin.back(), ", expected the ", n, " units"));
  }
  for (int c = 0; c < chunks; ++c) {
    if (in.chunk_begin[c + 1] <= in.chunk_begin[c]) {
      return Invalid(absl::StrCat("chunk_begin[", c + 1, "] is ", in.chunk_begin[c + 1],
                                  ", expected more than chunk_begin[", c, "] = ", in.chunk_begin[c],
                                  " (every chunk owns a unit)"));
    }
  }
  for (int u = 0; u < n; ++u) {
    for (int o : in.units[u].needs) {
      if (o < 0 || o >= n) {
        return Invalid(
            absl::StrCat("unit ", u, " (", in.units[u].name, ") needs unit ", o, ", expected in [0, ", n, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const PipelineProgramInput& in, const PipelineStageUnits& held) {
  if (in.zero_stage < 0 || in.zero_stage > 3) {
    return Invalid(absl::StrCat("ZeRO stage is ", in.zero_stage, ", expected 0, 1, 2 or 3"));
  }
  if (in.prefetch < 0) return Invalid(absl::StrCat("prefetch is ", in.prefetch, ", expected >= 0"));
  const int n = static_cast<int>(in.units.size());
  for (int u = 0; u < n; ++u) {
    const ProgramUnit& unit = in.units[u];
    if (unit.gather_bytes < 0) {
      return Invalid(
          absl::StrCat("unit ", u, " (", unit.name, ") has gather_bytes ", unit.gather_bytes, ", expected >= 0"));
    }
    if (u > 0 && !unit.backward && in.units[u - 1].backward) {
      return Invalid(absl::StrCat("unit ", u, " (", unit.name, ") has backward false after unit ", u - 1, " (",
                                  in.units[u - 1].name,
                                  ") with backward true; expected only a leading run of units without backward"));
    }
  }
  std::vector<bool> held_here(n, false);
  for (int u : held.own) held_here[u] = true;
  for (int u : held.mirrors) held_here[u] = true;
  std::vector<int> bucket_of(n, -1);
  for (int b = 0; b < static_cast<int>(in.buckets.size()); ++b) {
    const ProgramBucket& bucket = in.buckets[b];
    if (bucket.reduce_bytes < 0) {
      return Invalid(
          absl::StrCat("bucket ", b, " (", bucket.name, ") has reduce_bytes ", bucket.reduce_bytes, ", expected >= 0"));
    }
    for (int u : bucket.units) {
      if (u < 0 || u >= n) {
        return Invalid(absl::StrCat("bucket ", b, " (", bucket.name, ") lists unit ", u, ", expected in [0, ", n, ")"));
      }
      if (!held_here[u]) {
        return Invalid(absl::StrCat("bucket ", b, " (", bucket.name, ") lists unit ", u, " (", in.units[u].name,
                                    "), which stage ", in.stage, " neither computes nor mirrors"));
      }
      if (bucket_of[u] >= 0) {
        return Invalid(absl::StrCat("unit ", u, " (", in.units[u].name, ") is in buckets ", bucket_of[u], " and ", b,
                                    ", expected in one"));
      }
      bucket_of[u] = b;
    }
  }
  return absl::OkStatus();
}

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class Builder {
 public:
  Builder(const PipelineProgramInput& in, std::vector<ChunkOp> ops, StepProgram* program)
      : in_(in), ops_(std::move(ops)), program_(*program) {
    const int n = static_cast<int>(in.units.size());
    pp_ = in.shape.stages;
    chunks_ = in.shape.chunks();
    first_backward_ = FirstBackwardUnit(in.units);
    state_.assign(n, State::kReleased);
    // The needs in the order compute actions first use them.
    first_use_.assign(n, -1);
    for (const ChunkOp& op : ops_) {
      for (int u : ComputeOrder(op)) {
        for (int o : in.units[u].needs) {
          if (in.units[o].gather_bytes == 0 || first_use_[o] >= 0) continue;
          first_use_[o] = static_cast<int>(use_order_.size());
          use_order_.push_back(o);
        }
      }
    }
  }

  // The whole program but OPTIMIZER.
  void Run() {
    if (!ops_.empty()) PostRecv(ops_.front());
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      op_ = i;
      posted_next_ = false;
      const ChunkOp& op = ops_[i];
      switch (op.kind) {
        case ChunkOpKind::kForward:
          Forward(op.chunk, op.micro_batch);
          break;
        case ChunkOpKind::kBackward:
        case ChunkOpKind::kBackwardInput:
        case ChunkOpKind::kBackwardWeight:
          Backward(op.chunk, op.micro_batch, op.kind);
          break;
      }
      PostNext();
    }
    for (int b = 0; b < static_cast<int>(in_.buckets.size()) && in_.training; ++b) {
      if (close_[b].first < 0) Reduce(b);
    }
    while (!launched_.empty()) WaitReduce(launched_.front());
    for (int u = 0; u < static_cast<int>(in_.units.size()); ++u) Release(u);
  }

  // Where each bucket closes: (operation, unit) of its writers' last
  // weight-carrying backward; {-1, -1} when no own unit writes it.
  void PlanReductions(const std::vector<int>& own) {
    std::vector<int> last_weight_op(chunks_, -1);
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      const ChunkOpKind k = ops_[i].kind;
      if (k == ChunkOpKind::kBackward || k == ChunkOpKind::kBackwardWeight) last_weight_op[ops_[i].chunk] = i;
    }
    for (const ProgramBucket& bucket : in_.buckets) {
      std::vector<int> writers;
      std::pair<int, int> close{-1, -1};
      for (int w : own) {
        if (!in_.units[w].backward) continue;
        bool writes = Contains(bucket.units, w);
        for (int o : in_.units[w].needs) writes |= Contains(bucket.units, o);
        if (!writes) continue;
        writers.push_back(w);
        const int op = last_weight_op[ChunkOf(w)];
        // Later operation first; within one, the lower unit runs later.
        if (op > close.first || (op == close.first && w < close.second)) close = {op, w};
      }
      program_.bucket_writers.push_back(std::move(writers));
      close_.push_back(close);
    }
  }

  void Emit(ActionKind kind, int mb, int unit, int bucket = -1, int peer = -1,
            std::vector<IssuedCollective> issues = {}) {
    Action a;
    a.kind = kind;
    a.micro_batch = mb;
    a.unit = unit;
    a.bucket = bucket;
    a.peer_stage = peer;
    a.issues = std::move(issues);
    program_.actions.push_back(std::move(a));
  }

 private:
  enum class State { kReleased, kInFlight, kGathered };

  bool gathers() const { return in_.zero_stage == 3; }
  bool keep() const { return in_.keep_gathered_across_micro_batches; }
  int StageOf(int chunk) const { return chunk % pp_; }
  int Begin(int chunk) const { return in_.chunk_begin[chunk]; }
  int End(int chunk) const { return in_.chunk_begin[chunk + 1]; }
  int ChunkOf(int unit) const {
    return static_cast<int>(std::upper_bound(in_.chunk_begin.begin(), in_.chunk_begin.end(), unit) -
                            in_.chunk_begin.begin()) -
           1;
  }
  // The lowest unit of the chunk that runs backward (End when none does).
  int BackwardBegin(int chunk) const { return std::min(std::max(Begin(chunk), first_backward_), End(chunk)); }
  const std::string& Name(int u) const { return in_.units[u].name; }

  // Units in the order an operation computes them.
  std::vector<int> ComputeOrder(const ChunkOp& op) const {
    std::vector<int> order;
    if (op.kind == ChunkOpKind::kForward) {
      for (int u = Begin(op.chunk); u < End(op.chunk); ++u) order.push_back(u);
    } else {
      for (int u = End(op.chunk) - 1; u >= BackwardBegin(op.chunk); --u) order.push_back(u);
    }
    return order;
  }

  // The RECV_* that `op` consumes, if it has one.
  void PostRecv(const ChunkOp& op) {
    const int c = op.chunk, mb = op.micro_batch;
    if (op.kind == ChunkOpKind::kForward) {
      if (c == 0 || StageOf(c - 1) == in_.stage) return;
      Emit(ActionKind::kRecvAct, mb, Begin(c), -1, StageOf(c - 1),
           {{"pp", CommOp::kRecv, 0, absl::StrCat("act ", Name(Begin(c) - 1), " mb ", mb)}});
    } else if (op.kind != ChunkOpKind::kBackwardWeight) {
      const int last = End(c) - 1;
      if (c + 1 == chunks_ || StageOf(c + 1) == in_.stage || !in_.units[last].backward) return;
      Emit(ActionKind::kRecvGrad, mb, last, -1, StageOf(c + 1),
           {{"pp", CommOp::kRecv, 0, absl::StrCat("grad ", Name(last), " mb ", mb)}});
    }
  }

  // The next operation's RECV_*, once per operation: called before each
  // compute action and at the operation's end.
  void PostNext() {
    if (posted_next_) return;
    posted_next_ = true;
    if (op_ + 1 < static_cast<int>(ops_.size())) PostRecv(ops_[op_ + 1]);
  }

  void Forward(int c, int mb) {
    const int b = Begin(c), e = End(c);
    for (int u = b; u < e; ++u) {
      Acquire(u, /*forward=*/true, b, e);
      PostNext();
      Emit(ActionKind::kForward, mb, u);
      if (u == e - 1 && c + 1 < chunks_ && StageOf(c + 1) != in_.stage) {
        Emit(ActionKind::kSendAct, mb, u, -1, StageOf(c + 1),
             {{"pp", CommOp::kSend, 0, absl::StrCat("act ", Name(u), " mb ", mb)}});
      }
      if (!gathers() || keep() || !in_.reshard_after_forward) continue;
      for (int o : in_.units[u].needs) {
        bool later = false;
        for (int v = u + 1; v < e; ++v) later |= Contains(in_.units[v].needs, o);
        if (!later && !in_.units[o].persistent) Release(o);
      }
    }
  }

  void Backward(int c, int mb, ChunkOpKind kind) {
    const int b = Begin(c), lo = BackwardBegin(c), e = End(c);
    const bool weight_only = kind == ChunkOpKind::kBackwardWeight;
    for (int u = e - 1; u >= lo; --u) {
      Acquire(u, /*forward=*/false, lo, e);
      PostNext();
      if (!weight_only && in_.units[u].checkpointed) Emit(ActionKind::kRecompute, mb, u);
      Emit(kind == ChunkOpKind::kBackward        ? ActionKind::kBackward
           : kind == ChunkOpKind::kBackwardInput ? ActionKind::kBackwardInput
                                                 : ActionKind::kBackwardWeight,
           mb, u);
      if (!weight_only && u == b && c > 0 && StageOf(c - 1) != in_.stage && in_.units[b - 1].backward) {
        Emit(ActionKind::kSendGrad, mb, u, -1, StageOf(c - 1),
             {{"pp", CommOp::kSend, 0, absl::StrCat("grad ", Name(b - 1), " mb ", mb)}});
      }
      if (gathers() && !keep()) {
        for (int o : in_.units[u].needs) {
          bool later = false;
          for (int v = lo; v < u; ++v) later |= Contains(in_.units[v].needs, o);
          if (!later && !in_.units[o].persistent) Release(o);
        }
      }
      if (kind == ChunkOpKind::kBackwardInput) continue;
      for (int bucket = 0; bucket < static_cast<int>(in_.buckets.size()); ++bucket) {
        if (close_[bucket] != std::make_pair(op_, u)) continue;
        Reduce(bucket);
        if (in_flight_ >= 0) WaitReduce(in_flight_);
        in_flight_ = bucket;
      }
    }
  }

  // Gathers u's needs and the prefetched ones, then waits for u's.
  // [lo, e): the operation's units (per-operation gathering only).
  void Acquire(int u, bool forward, int lo, int e) {
    if (!gathers()) return;
    const std::vector<int>& needs = in_.units[u].needs;
    for (int o : needs) Gather(o);
    if (keep()) {
      int last = -1;
      for (int o : needs) last = std::max(last, first_use_[o]);
      for (int k = 1; k <= in_.prefetch && last >= 0 && last + k < static_cast<int>(use_order_.size()); ++k) {
        Gather(use_order_[last + k]);
      }
    } else {
      for (int k = 1; k <= in_.prefetch; ++k) {
        const int next = forward ? u + k : u - k;
        if (next < lo || next >= e) break;
        for (int o : in_.units[next].needs) Gather(o);
      }
    }
    for (int o : needs) {
      if (state_[o] != State::kInFlight) continue;
      Emit(ActionKind::kWaitGather, -1, o);
      state_[o] = State::kGathered;
    }
  }

  void Gather(int u) {
    if (in_.units[u].gather_bytes == 0 || state_[u] != State::kReleased) return;
    Emit(ActionKind::kGather, -1, u, -1, -1,
         {{"dp", CommOp::kAllGather, in_.units[u].gather_bytes, absl::StrCat("params ", Name(u))}});
    state_[u] = State::kInFlight;
  }

  void Release(int u) {
    if (state_[u] == State::kReleased) return;
    Emit(ActionKind::kRelease, -1, u);
    state_[u] = State::kReleased;
  }

  void Reduce(int b) {
    std::vector<IssuedCollective> issues;
    if (in_.buckets[b].reduce_bytes > 0) {
      issues.push_back(
          {"dp", in_.buckets[b].reduce_op, in_.buckets[b].reduce_bytes, absl::StrCat("grads ", in_.buckets[b].name)});
    }
    if (in_.buckets[b].replica_bytes > 0) {
      issues.push_back({"dp_replica", CommOp::kAllReduce, in_.buckets[b].replica_bytes,
                        absl::StrCat("grads ", in_.buckets[b].name, " over replicas")});
    }
    Emit(ActionKind::kReduce, -1, -1, b, -1, std::move(issues));
    launched_.push_back(b);
  }

  void WaitReduce(int b) {
    auto it = std::find(launched_.begin(), launched_.end(), b);
    if (it == launched_.end()) return;
    launched_.erase(it);
    Emit(ActionKind::kWaitReduce, -1, -1, b);
  }

  const PipelineProgramInput& in_;
  const std::vector<ChunkOp> ops_;
  StepProgram& program_;
  int pp_ = 1;
  int chunks_ = 1;
  int first_backward_ = 0;
  int op_ = 0;                // the operation being expanded
  bool posted_next_ = false;  // its successor's RECV_* is posted
  std::vector<State> state_;
  std::vector<int> first_use_;              // by unit: position in use_order_, -1 if never needed
  std::vector<int> use_order_;              // needs in order of first use
  std::vector<std::pair<int, int>> close_;  // by bucket: (operation, unit)
  std::vector<int> launched_;               // buckets in launch order, not yet waited
  int in_flight_ = -1;                      // the last bucket REDUCEd at a close point
};

}  // namespace

PipelineStageUnits StageUnits(const PipelineProgramInput& in) {
  PipelineStageUnits held;
  const int n = static_cast<int>(in.units.size()), pp = std::max(1, in.shape.stages);
  std::vector<bool> own(n, false), needed(n, false);
  for (int c = in.stage; c + 1 < static_cast<int>(in.chunk_begin.size()); c += pp) {
    for (int u = std::max(0, in.chunk_begin[c]); u < std::min(n, in.chunk_begin[c + 1]); ++u) own[u] = true;
  }
  for (int u = 0; u < n; ++u) {
    if (!own[u]) continue;
    held.own.push_back(u);
    for (int o : in.units[u].needs) {
      if (o >= 0 && o < n) needed[o] = true;
    }
  }
  for (int u = 0; u < n; ++u) {
    if (needed[u] && !own[u]) held.mirrors.push_back(u);
  }
  return held;
}

absl::StatusOr<StepProgram> BuildPipelineProgram(const PipelineProgramInput& in) {
  RETURN_IF_ERROR(ValidateChunks(in));
  const PipelineStageUnits held = StageUnits(in);
  RETURN_IF_ERROR(Validate(in, held));
  std::vector<ChunkOp> ops;
  if (in.training) {
    ASSIGN_OR_RETURN(std::vector<std::vector<ChunkOp>> schedule, BuildPipelineSchedule(in.schedule, in.shape));
    ops = std::move(schedule[in.stage]);
  } else {
    for (int c = in.stage; c < in.shape.chunks(); c += in.shape.stages) {
      ChunkOp op;
      op.chunk = c;
      ops.push_back(op);
    }
  }
  StepProgram program;
  program.micro_batches = in.training ? in.shape.micro_batches : 1;
  program.num_units = static_cast<int>(in.units.size());
  program.num_buckets = static_cast<int>(in.buckets.size());
  for (const ProgramUnit& u : in.units) program.names.units.push_back(u.name);
  for (const ProgramBucket& b : in.buckets) program.names.buckets.push_back(b.name);
  Builder builder(in, std::move(ops), &program);
  builder.PlanReductions(held.own);
  builder.Run();
  if (in.training) builder.Emit(ActionKind::kOptimizer, -1, -1, -1, -1, in.optimizer_collectives);
  return program;
}

}  // namespace zeroshard
