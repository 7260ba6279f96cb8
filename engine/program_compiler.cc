#include "engine/program_compiler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The lowest unit that runs backward; units.size() when none does.
int FirstBackwardUnit(const std::vector<ProgramUnit>& units) {
  int first = static_cast<int>(units.size());
  while (first > 0 && units[first - 1].backward) --first;
  return first;
}

absl::Status ValidateChunks(const ProgramCompilerInput& in) {
  const int n = static_cast<int>(in.units.size()), chunks = in.chunks();
  if (in.stages < 1) return Invalid(absl::StrCat("stages is ", in.stages, ", expected >= 1"));
  if (in.stage < 0 || in.stage >= in.stages) {
    return Invalid(absl::StrCat("stage is ", in.stage, ", expected in [0, ", in.stages, ")"));
  }
  if (chunks < 1 || chunks % in.stages != 0) {
    return Invalid(absl::StrCat("chunk_begin has ", in.chunk_begin.size(),
                                " entries, expected a multiple of the ", in.stages, " stages plus 1"));
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

absl::Status Validate(const ProgramCompilerInput& in, const StageUnitSet& held) {
  if (in.prefetch < 0) return Invalid(absl::StrCat("prefetch is ", in.prefetch, ", expected >= 0"));
  if (in.micro_batches < 1) {
    return Invalid(absl::StrCat("micro_batches is ", in.micro_batches, ", expected >= 1"));
  }
  for (const ChunkOp& op : in.ops) {
    if (op.chunk < 0 || op.chunk >= in.chunks() || op.chunk % in.stages != in.stage) {
      return Invalid(absl::StrCat("operation ", ChunkOpKindName(op.kind), " of chunk ", op.chunk,
                                  ", expected a chunk of stage ", in.stage));
    }
  }
  const int n = static_cast<int>(in.units.size());
  for (int u = 0; u < n; ++u) {
    const ProgramUnit& unit = in.units[u];
    if (unit.gather_bytes < 0) {
      return Invalid(
          absl::StrCat("unit ", u, " (", unit.name, ") has gather_bytes ", unit.gather_bytes, ", expected >= 0"));
    }
    if (unit.output_bytes < 0) {
      return Invalid(
          absl::StrCat("unit ", u, " (", unit.name, ") has output_bytes ", unit.output_bytes, ", expected >= 0"));
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

class Compiler {
 public:
  Compiler(const ProgramCompilerInput& in, StepProgram* program) : in_(in), program_(*program) {
    const int n = static_cast<int>(in.units.size());
    first_backward_ = FirstBackwardUnit(in.units);
    state_.assign(n, State::kReleased);
    // The needs in the order compute actions first use them.
    first_use_.assign(n, -1);
    for (const ChunkOp& op : in.ops) {
      for (int u : ComputeOrder(op)) {
        for (int o : in.units[u].needs) {
          if (in.units[o].gather_bytes == 0 || first_use_[o] >= 0) continue;
          first_use_[o] = static_cast<int>(use_order_.size());
          use_order_.push_back(o);
        }
      }
    }
    // Rounds: each micro-batch under reduce_every_micro_batch, else the
    // whole step; a round ends at its last operation.
    const int ops = static_cast<int>(in.ops.size());
    round_of_.assign(ops, 0);
    round_end_.assign(ops, false);
    std::map<int, int> last_of_round;
    for (int i = 0; i < ops; ++i) {
      if (in.reduce_every_micro_batch) round_of_[i] = in.ops[i].micro_batch;
      last_of_round[round_of_[i]] = i;
    }
    for (const auto& [round, last] : last_of_round) round_end_[last] = true;
  }

  // Where each bucket closes in each round, and the writers of each.
  void PlanReductions(const std::vector<int>& own) {
    const bool after_backward = in_.zero.reduces_after_backward(in_.chunks() > 1);
    for (const ProgramBucket& bucket : in_.buckets) {
      std::vector<int> writers;
      for (int w : own) {
        if (!in_.units[w].backward) continue;
        bool writes = Contains(bucket.units, w);
        for (int o : in_.units[w].needs) writes |= Contains(bucket.units, o);
        if (writes) writers.push_back(w);
      }
      // (operation, unit) per round; {-1, -1} where it does not close.
      std::vector<std::pair<int, int>> close;
      for (int i = 0; i < static_cast<int>(in_.ops.size()) && !after_backward && in_.training; ++i) {
        const ChunkOpKind k = in_.ops[i].kind;
        if (k != ChunkOpKind::kBackward && k != ChunkOpKind::kBackwardWeight) continue;
        const int round = round_of_[i];
        if (static_cast<int>(close.size()) <= round) close.resize(round + 1, {-1, -1});
        for (int w : writers) {
          if (ChunkOf(w) != in_.ops[i].chunk) continue;
          // Later operation first; within one, the lower unit runs later.
          std::pair<int, int>& c = close[round];
          if (i > c.first || (i == c.first && w < c.second)) c = {i, w};
        }
      }
      program_.bucket_writers.push_back(std::move(writers));
      close_.push_back(std::move(close));
    }
  }

  void Run() {
    if (!in_.ops.empty()) PostRecv(in_.ops.front());
    for (int i = 0; i < static_cast<int>(in_.ops.size()); ++i) {
      op_ = i;
      posted_next_ = false;
      const ChunkOp& op = in_.ops[i];
      if (op.kind == ChunkOpKind::kForward) {
        Forward(op.chunk, op.micro_batch);
      } else {
        Backward(op.chunk, op.micro_batch, op.kind);
      }
      PostNext();
      if (round_end_[i] && in_.training) EndRound();
    }
    for (int u = 0; u < static_cast<int>(in_.units.size()); ++u) Release(u);
  }

 private:
  enum class State { kReleased, kInFlight, kGathered };

  bool gathers() const { return in_.zero.gathers_params(); }
  bool keep() const { return in_.keep_gathered_across_micro_batches; }
  int StageOf(int chunk) const { return chunk % in_.stages; }
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
           {{"pp", CommOp::kRecv, in_.units[Begin(c) - 1].output_bytes, absl::StrCat("act ", Name(Begin(c) - 1), " mb ", mb)}});
    } else if (op.kind != ChunkOpKind::kBackwardWeight) {
      const int last = End(c) - 1;
      if (c + 1 == in_.chunks() || StageOf(c + 1) == in_.stage || !in_.units[last].backward) return;
      Emit(ActionKind::kRecvGrad, mb, last, -1, StageOf(c + 1),
           {{"pp", CommOp::kRecv, in_.units[last].output_bytes, absl::StrCat("grad ", Name(last), " mb ", mb)}});
    }
  }

  // The next operation's RECV_*, once per operation: called before each
  // compute action and at the operation's end.
  void PostNext() {
    if (posted_next_) return;
    posted_next_ = true;
    if (op_ + 1 < static_cast<int>(in_.ops.size())) PostRecv(in_.ops[op_ + 1]);
  }

  void Forward(int c, int mb) {
    const int b = Begin(c), e = End(c);
    for (int u = b; u < e; ++u) {
      Acquire(u, /*forward=*/true, b, e);
      PostNext();
      Emit(ActionKind::kForward, mb, u);
      if (u == e - 1 && c + 1 < in_.chunks() && StageOf(c + 1) != in_.stage) {
        Emit(ActionKind::kSendAct, mb, u, -1, StageOf(c + 1),
             {{"pp", CommOp::kSend, in_.units[u].output_bytes, absl::StrCat("act ", Name(u), " mb ", mb)}});
      }
      if (!gathers() || keep() || !in_.reshard_after_forward) continue;
      for (int o : in_.units[u].needs) {
        bool later = false;
        for (int v = u + 1; v < e; ++v) later |= Contains(in_.units[v].needs, o);
        if (!later && !in_.units[o].persistent && !NeededByNextBackward(c, mb, o)) Release(o);
      }
    }
  }

  // Whether the operation after this forward of (c, mb) is that chunk's
  // backward of the same micro-batch and its first unit needs `o`: the
  // turnaround keeps `o` gathered rather than release and regather it at once
  // (FSDP keeps its root unit unsharded the same way).
  bool NeededByNextBackward(int c, int mb, int o) const {
    if (op_ + 1 >= static_cast<int>(in_.ops.size())) return false;
    const ChunkOp& next = in_.ops[op_ + 1];
    if (next.kind == ChunkOpKind::kForward || next.chunk != c || next.micro_batch != mb) return false;
    const int first = End(c) - 1;
    return first >= BackwardBegin(c) && Contains(in_.units[first].needs, o);
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
             {{"pp", CommOp::kSend, in_.units[b - 1].output_bytes, absl::StrCat("grad ", Name(b - 1), " mb ", mb)}});
      }
      if (gathers() && !keep()) {
        for (int o : in_.units[u].needs) {
          bool later = false;
          for (int v = lo; v < u; ++v) later |= Contains(in_.units[v].needs, o);
          if (!later && !in_.units[o].persistent) Release(o);
        }
      }
      if (kind == ChunkOpKind::kBackwardInput || !in_.training) continue;
      const int round = round_of_[op_];
      for (int bucket = 0; bucket < static_cast<int>(in_.buckets.size()); ++bucket) {
        const std::vector<std::pair<int, int>>& close = close_[bucket];
        if (round >= static_cast<int>(close.size()) || close[round] != std::make_pair(op_, u)) continue;
        Reduce(bucket);
        closed_.push_back(bucket);
        if (in_flight_ >= 0) WaitReduce(in_flight_);
        in_flight_ = bucket;
      }
    }
  }

  // The round's end: buckets that did not close, then every wait.
  void EndRound() {
    for (int b = 0; b < static_cast<int>(in_.buckets.size()); ++b) {
      if (!Contains(closed_, b)) Reduce(b);
    }
    while (!launched_.empty()) WaitReduce(launched_.front());
    closed_.clear();
    in_flight_ = -1;
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
    const ProgramBucket& bucket = in_.buckets[b];
    if (bucket.reduce_bytes > 0) {
      issues.push_back({"dp", bucket.reduce_op, bucket.reduce_bytes, absl::StrCat("grads ", bucket.name)});
    }
    if (bucket.replica_bytes > 0) {
      issues.push_back({"dp_replica", bucket.replica_op, bucket.replica_bytes,
                        absl::StrCat("grads ", bucket.name, " over replicas")});
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

  const ProgramCompilerInput& in_;
  StepProgram& program_;
  int first_backward_ = 0;
  int op_ = 0;                // the operation being expanded
  bool posted_next_ = false;  // its successor's RECV_* is posted
  std::vector<State> state_;
  std::vector<int> first_use_;   // by unit: position in use_order_, -1 if never needed
  std::vector<int> use_order_;   // needs in order of first use
  std::vector<int> round_of_;    // by operation
  std::vector<bool> round_end_;  // by operation: the last of its round
  std::vector<std::vector<std::pair<int, int>>> close_;  // by bucket, by round: (operation, unit)
  std::vector<int> closed_;      // buckets REDUCEd at a close point this round
  std::vector<int> launched_;    // buckets in launch order, not yet waited
  int in_flight_ = -1;           // the last bucket REDUCEd at a close point
};

}  // namespace

StageUnitSet HeldUnits(const std::vector<ProgramUnit>& units, const std::vector<int>& chunk_begin, int stages,
                       int stage) {
  StageUnitSet held;
  const int n = static_cast<int>(units.size()), pp = std::max(1, stages);
  std::vector<bool> own(n, false), needed(n, false);
  for (int c = stage; c + 1 < static_cast<int>(chunk_begin.size()); c += pp) {
    for (int u = std::max(0, chunk_begin[c]); u < std::min(n, chunk_begin[c + 1]); ++u) own[u] = true;
  }
  for (int u = 0; u < n; ++u) {
    if (!own[u]) continue;
    held.own.push_back(u);
    for (int o : units[u].needs) {
      if (o >= 0 && o < n) needed[o] = true;
    }
  }
  for (int u = 0; u < n; ++u) {
    if (needed[u] && !own[u]) held.mirrors.push_back(u);
  }
  return held;
}

absl::StatusOr<StepProgram> CompileProgram(const ProgramCompilerInput& in) {
  RETURN_IF_ERROR(ValidateChunks(in));
  const StageUnitSet held = HeldUnits(in.units, in.chunk_begin, in.stages, in.stage);
  RETURN_IF_ERROR(Validate(in, held));
  StepProgram program;
  program.micro_batches = in.training ? in.micro_batches : 1;
  program.num_units = static_cast<int>(in.units.size());
  program.num_buckets = static_cast<int>(in.buckets.size());
  for (const ProgramUnit& u : in.units) program.names.units.push_back(u.name);
  for (const ProgramBucket& b : in.buckets) program.names.buckets.push_back(b.name);
  Compiler compiler(in, &program);
  compiler.PlanReductions(held.own);
  compiler.Run();
  return program;
}

}  // namespace zeroshard
