#include "engine/data_parallel_program.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

// The lowest unit that runs backward; units.size() when none does.
int FirstBackwardUnit(const std::vector<ProgramUnit>& units) {
  int first = static_cast<int>(units.size());
  while (first > 0 && units[first - 1].backward) --first;
  return first;
}

absl::Status Validate(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets,
                      const DataParallelProgramOptions& options) {
  if (options.stage < 0 || options.stage > 3) {
    return absl::InvalidArgumentError(absl::StrCat("stage is ", options.stage, ", expected 0, 1, 2 or 3"));
  }
  if (options.micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("micro_batches is ", options.micro_batches, ", expected >= 1"));
  }
  if (options.prefetch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("prefetch is ", options.prefetch, ", expected >= 0"));
  }
  const int n = static_cast<int>(units.size());
  for (int u = 0; u < n; ++u) {
    const ProgramUnit& unit = units[u];
    for (int o : unit.needs) {
      if (o < 0 || o >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat("unit ", u, " (", unit.name, ") needs unit ", o, ", expected in [0, ", n, ")"));
      }
    }
    if (unit.gather_bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit ", u, " (", unit.name, ") has gather_bytes ", unit.gather_bytes, ", expected >= 0"));
    }
    if (u > 0 && !unit.backward && units[u - 1].backward) {
      return absl::InvalidArgumentError(absl::StrCat("unit ", u, " (", unit.name, ") has backward false after unit ",
                                                     u - 1, " (", units[u - 1].name,
                                                     ") with backward true; expected only a leading run of "
                                                     "units without backward"));
    }
  }
  std::vector<int> bucket_of(n, -1);
  for (int b = 0; b < static_cast<int>(buckets.size()); ++b) {
    const ProgramBucket& bucket = buckets[b];
    if (bucket.reduce_bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket ", b, " (", bucket.name, ") has reduce_bytes ", bucket.reduce_bytes, ", expected >= 0"));
    }
    for (int u : bucket.units) {
      if (u < 0 || u >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat("bucket ", b, " (", bucket.name, ") lists unit ", u, ", expected in [0, ", n, ")"));
      }
      if (bucket_of[u] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("unit ", u, " (", units[u].name, ") is in buckets ",
                                                       bucket_of[u], " and ", b, ", expected in one"));
      }
      bucket_of[u] = b;
    }
  }
  return absl::OkStatus();
}

// Emits the program's actions; the gather state per unit follows
// UnitShard's (GATHER only from released, WAIT only when in flight,
// RELEASE of anything not released).
class Builder {
 public:
  Builder(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets,
          const DataParallelProgramOptions& options, StepProgram* program)
      : units_(units), buckets_(buckets), options_(options), program_(*program) {
    const int n = static_cast<int>(units.size());
    first_backward_ = FirstBackwardUnit(units);
    state_.assign(n, State::kReleased);
    last_forward_use_.assign(n, -1);
    last_backward_use_.assign(n, n);
    for (int u = 0; u < n; ++u) {
      for (int o : units[u].needs) {
        last_forward_use_[o] = std::max(last_forward_use_[o], u);
        if (units[u].backward) last_backward_use_[o] = std::min(last_backward_use_[o], u);
      }
    }
    close_ = BucketCloseUnits(units, buckets);
  }

  void Forward(int m) {
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
      Acquire(u, /*forward=*/true);
      Emit(ActionKind::kForward, m, u);
      if (gathers() && options_.reshard_after_forward) {
        for (int o : units_[u].needs) {
          if (last_forward_use_[o] == u && !units_[o].persistent) Release(o);
        }
      }
    }
  }

  void Backward(int m, bool reduce) {
    int in_flight = -1;  // the last launched bucket, waited when the next one launches
    for (int u = static_cast<int>(units_.size()) - 1; u >= first_backward_; --u) {
      Acquire(u, /*forward=*/false);
      if (units_[u].checkpointed) Emit(ActionKind::kRecompute, m, u);
      Emit(ActionKind::kBackward, m, u);
      if (gathers()) {
        for (int o : units_[u].needs) {
          if (last_backward_use_[o] == u && !units_[o].persistent) Release(o);
        }
      }
      if (!reduce || options_.stage == 1) continue;
      for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
        if (close_[b] != u) continue;
        Reduce(b);
        if (in_flight >= 0) WaitReduce(in_flight);
        in_flight = b;
      }
    }
    if (!reduce) return;
    for (int b = 0; b < static_cast<int>(buckets_.size()); ++b) {
      if (options_.stage == 1 || close_[b] < 0) Reduce(b);
    }
    while (!launched_.empty()) WaitReduce(launched_.front());
  }

  void ReleaseAll() {
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) Release(u);
  }

  void Emit(ActionKind kind, int m, int u, int bucket = -1, std::vector<IssuedCollective> issues = {}) {
    Action a;
    a.kind = kind;
    a.micro_batch = m;
    a.unit = u;
    a.bucket = bucket;
    a.issues = std::move(issues);
    program_.actions.push_back(std::move(a));
  }

 private:
  enum class State { kReleased, kInFlight, kGathered };

  bool gathers() const { return options_.stage == 3; }

  // The unit's needs, then the next `prefetch` units' of the pass (the
  // backward pass ends at first_backward_), then waits for the unit's own.
  void Acquire(int u, bool forward) {
    if (!gathers()) return;
    for (int o : units_[u].needs) Gather(o);
    for (int k = 1; k <= options_.prefetch; ++k) {
      const int next = forward ? u + k : u - k;
      if (next < (forward ? 0 : first_backward_) || next >= static_cast<int>(units_.size())) break;
      for (int o : units_[next].needs) Gather(o);
    }
    for (int o : units_[u].needs) {
      if (state_[o] != State::kInFlight) continue;
      Emit(ActionKind::kWaitGather, -1, o);
      state_[o] = State::kGathered;
    }
  }

  void Gather(int u) {
    if (units_[u].gather_bytes == 0 || state_[u] != State::kReleased) return;
    Emit(ActionKind::kGather, -1, u, -1,
         {{"dp", CommOp::kAllGather, units_[u].gather_bytes, absl::StrCat("params ", units_[u].name)}});
    state_[u] = State::kInFlight;
  }

  void Release(int u) {
    if (state_[u] == State::kReleased) return;
    Emit(ActionKind::kRelease, -1, u);
    state_[u] = State::kReleased;
  }

  void Reduce(int b) {
    std::vector<IssuedCollective> issues;
    if (buckets_[b].reduce_bytes > 0) {
      issues.push_back(
          {"dp", buckets_[b].reduce_op, buckets_[b].reduce_bytes, absl::StrCat("grads ", buckets_[b].name)});
    }
    if (buckets_[b].replica_bytes > 0) {
      issues.push_back({"dp_replica", CommOp::kAllReduce, buckets_[b].replica_bytes,
                        absl::StrCat("grads ", buckets_[b].name, " over replicas")});
    }
    Emit(ActionKind::kReduce, -1, -1, b, std::move(issues));
    launched_.push_back(b);
  }

  void WaitReduce(int b) {
    auto it = std::find(launched_.begin(), launched_.end(), b);
    if (it == launched_.end()) return;
    launched_.erase(it);
    Emit(ActionKind::kWaitReduce, -1, -1, b);
  }

  const std::vector<ProgramUnit>& units_;
  const std::vector<ProgramBucket>& buckets_;
  const DataParallelProgramOptions& options_;
  StepProgram& program_;
  int first_backward_ = 0;
  std::vector<State> state_;
  std::vector<int> last_forward_use_;   // per unit: highest unit needing it
  std::vector<int> last_backward_use_;  // per unit: lowest unit that runs backward and needs it
  std::vector<int> close_;              // per bucket
  std::vector<int> launched_;           // buckets in launch order, not yet waited
};

}  // namespace

std::vector<int> BucketCloseUnits(const std::vector<ProgramUnit>& units, const std::vector<ProgramBucket>& buckets) {
  const int n = static_cast<int>(units.size());
  const int first_backward = FirstBackwardUnit(units);
  std::vector<int> close;
  for (const ProgramBucket& bucket : buckets) {
    int lowest = n;
    for (int u : bucket.units) {
      if (u >= 0 && u < n && units[u].backward) lowest = std::min(lowest, u);
    }
    for (int i = 0; i < n && i < lowest; ++i) {
      if (!units[i].backward) continue;
      for (int o : units[i].needs) {
        if (std::find(bucket.units.begin(), bucket.units.end(), o) != bucket.units.end()) lowest = std::min(lowest, i);
      }
    }
    // Nothing that runs backward writes it: the backward pass's last unit.
    if (lowest == n) lowest = first_backward < n ? first_backward : -1;
    close.push_back(lowest);
  }
  return close;
}

absl::StatusOr<StepProgram> BuildDataParallelProgram(const std::vector<ProgramUnit>& units,
                                                     const std::vector<ProgramBucket>& buckets,
                                                     const DataParallelProgramOptions& options) {
  if (absl::Status s = Validate(units, buckets, options); !s.ok()) return s;
  StepProgram program;
  program.micro_batches = options.training ? options.micro_batches : 1;
  program.num_units = static_cast<int>(units.size());
  program.num_buckets = static_cast<int>(buckets.size());
  for (const ProgramUnit& u : units) program.names.units.push_back(u.name);
  for (const ProgramBucket& b : buckets) {
    program.names.buckets.push_back(b.name);
    std::vector<int> writers;
    for (int u = 0; u < program.num_units; ++u) {
      if (!units[u].backward) continue;
      bool writes = std::find(b.units.begin(), b.units.end(), u) != b.units.end();
      for (int o : units[u].needs) writes |= std::find(b.units.begin(), b.units.end(), o) != b.units.end();
      if (writes) writers.push_back(u);
    }
    program.bucket_writers.push_back(std::move(writers));
  }
  Builder builder(units, buckets, options, &program);
  if (!options.training) {
    builder.Forward(0);
    builder.ReleaseAll();
    return program;
  }
  for (int m = 0; m < options.micro_batches; ++m) {
    builder.Forward(m);
    builder.Backward(m, options.reduce_every_micro_batch || m == options.micro_batches - 1);
  }
  builder.ReleaseAll();
  builder.Emit(ActionKind::kOptimizer, -1, -1, -1, options.optimizer_collectives);
  return program;
}

}  // namespace zeroshard
