#include "sharding/param_gatherer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<ParamGatherer>> ParamGatherer::Create(std::vector<UnitShard*> units,
                                                                     std::vector<std::vector<int>> needs,
                                                                     const GatherOptions& options) {
  if (options.prefetch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("prefetch is ", options.prefetch, ", expected >= 0"));
  }
  const int n = static_cast<int>(units.size());
  if (static_cast<int>(needs.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("needs lists ", needs.size(), " units, expected ", n));
  }
  std::unique_ptr<ParamGatherer> g(new ParamGatherer());
  g->options_ = options;
  g->active_ = n > 0 && units[0]->stage() == 3;
  g->persistent_.assign(n, false);
  g->last_forward_use_.assign(n, -1);
  g->last_backward_use_.assign(n, n);
  for (int i = 0; i < n; ++i) {
    g->persistent_[i] = units[i]->layout().numel() < options.persistence_threshold;
    for (int o : needs[i]) {
      if (o < 0 || o >= n) {
        return absl::InvalidArgumentError(absl::StrCat("unit ", i, " needs unit ", o, ", expected in [0, ", n, ")"));
      }
      g->last_forward_use_[o] = std::max(g->last_forward_use_[o], i);
      g->last_backward_use_[o] = std::min(g->last_backward_use_[o], i);
    }
  }
  g->units_ = std::move(units);
  g->needs_ = std::move(needs);
  return g;
}

void ParamGatherer::CountLive() {
  int live = 0;
  for (UnitShard* u : units_) live += (u->gathered() || u->gather_in_flight()) ? 1 : 0;
  peak_live_ = std::max(peak_live_, live);
}

absl::Status ParamGatherer::Acquire(int unit, bool forward) {
  if (!active_) return absl::OkStatus();
  for (int o : needs_[unit]) RETURN_IF_ERROR(units_[o]->StartGather());
  const int n = static_cast<int>(units_.size());
  for (int k = 1; k <= options_.prefetch; ++k) {
    const int next = forward ? unit + k : unit - k;
    if (next < 0 || next >= n) break;
    for (int o : needs_[next]) RETURN_IF_ERROR(units_[o]->StartGather());
  }
  CountLive();
  for (int o : needs_[unit]) RETURN_IF_ERROR(units_[o]->WaitGather());
  return absl::OkStatus();
}

absl::Status ParamGatherer::AfterForward(int unit) {
  if (!active_ || !options_.reshard_after_forward) return absl::OkStatus();
  for (int o : needs_[unit]) {
    if (last_forward_use_[o] == unit && !persistent_[o]) RETURN_IF_ERROR(units_[o]->Release());
  }
  return absl::OkStatus();
}

absl::Status ParamGatherer::AfterBackward(int unit) {
  if (!active_) return absl::OkStatus();
  for (int o : needs_[unit]) {
    if (last_backward_use_[o] == unit && !persistent_[o]) RETURN_IF_ERROR(units_[o]->Release());
  }
  return absl::OkStatus();
}

absl::Status ParamGatherer::ReleaseAll() {
  absl::Status first;
  for (UnitShard* u : units_) {
    absl::Status s = u->Release();
    if (first.ok()) first = s;
  }
  return first;
}

}  // namespace zeroshard
