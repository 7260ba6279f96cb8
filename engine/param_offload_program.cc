#include "engine/param_offload_program.h"

#include <algorithm>
#include <utility>

namespace zeroshard {
namespace {

struct Use {
  int unit = -1;
  int first = -1;  // the first action that needs the shard in its slot
  int last = -1;   // the last one
  bool store = false;
  int slot = -1;
};

Action MakeIo(ActionKind kind, int unit, int slot) {
  Action a;
  a.kind = kind;
  a.unit = unit;
  a.param_slot = slot;
  return a;
}

bool Streams(const ParamShardIoInput& in, int u) {
  return u >= 0 && u < static_cast<int>(in.streams.size()) && in.streams[u];
}

// Every use in order of its first action (ties: creation order).
std::vector<Use> FindUses(const ParamShardIoInput& in, const StepProgram& program) {
  const std::vector<Action>& actions = program.actions;
  const int n = static_cast<int>(actions.size());
  std::vector<Use> uses;
  std::vector<int> update_use(in.streams.size(), -1);  // by unit: its optimizer-phase use
  std::vector<bool> chunked(in.buckets.size(), false);
  for (const OffloadChunk& c : program.chunks) {
    if (c.bucket >= 0 && c.bucket < static_cast<int>(chunked.size())) chunked[c.bucket] = true;
  }
  auto touch = [&](int u, int i) {
    if (!Streams(in, u)) return;
    if (update_use[u] < 0) {
      update_use[u] = static_cast<int>(uses.size());
      uses.push_back({u, i, i, /*store=*/true});
    }
    uses[update_use[u]].last = i;
  };
  for (int i = 0; i < n; ++i) {
    const Action& a = actions[i];
    if (a.kind == ActionKind::kGather && Streams(in, a.unit)) {
      int last = n - 1;
      for (int j = i + 1; j < n; ++j) {
        if ((actions[j].kind == ActionKind::kWaitGather || actions[j].kind == ActionKind::kRelease) &&
            actions[j].unit == a.unit) {
          last = j;
          break;
        }
      }
      uses.push_back({a.unit, i, last, /*store=*/false});
    } else if (a.kind == ActionKind::kUpdate && a.chunk >= 0 && a.chunk < static_cast<int>(program.chunks.size())) {
      touch(program.chunks[a.chunk].unit, i);
    } else if ((a.kind == ActionKind::kUpdate || a.kind == ActionKind::kPublish) && a.chunk < 0 && a.bucket >= 0 &&
               a.bucket < static_cast<int>(in.buckets.size()) && !chunked[a.bucket]) {
      for (int u : in.buckets[a.bucket]) touch(u, i);
    } else if (a.kind == ActionKind::kTiedPublish) {
      touch(a.unit, i);  // the owner's shard is sent, the mirror's received
    }
  }
  std::stable_sort(uses.begin(), uses.end(), [](const Use& x, const Use& y) { return x.first < y.first; });
  return uses;
}

}  // namespace

void AddParamShardIo(const ParamShardIoInput& in, StepProgram* program) {
  std::vector<Use> uses = FindUses(in, *program);
  if (uses.empty()) return;
  const std::vector<Action>& actions = program->actions;
  const int n = static_cast<int>(actions.size());
  // The most uses live at once.
  std::vector<int> live(n + 1, 0);
  for (const Use& u : uses) {
    ++live[u.first];
    --live[u.last + 1];
  }
  int most = 0, now = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, now += live[i]);
  const int K = std::max(in.min_slots, most);
  program->param_slots = K;
  // Each use the slot free the longest (-1: not used yet this step).
  std::vector<int> free_after(K, -1), last_use(K, -1);
  std::vector<int> previous(uses.size(), -1);
  for (int j = 0; j < static_cast<int>(uses.size()); ++j) {
    int best = -1;
    for (int s = 0; s < K; ++s) {
      if (free_after[s] >= uses[j].first) continue;
      if (best < 0 || free_after[s] < free_after[best]) best = s;
    }
    // best >= 0: at most K uses are live at uses[j].first, this one included.
    uses[j].slot = best;
    previous[j] = last_use[best];
    last_use[best] = j;
    free_after[best] = uses[j].last;
  }
  std::vector<std::vector<Action>> before(n), after(n);
  std::vector<Action> head;
  for (int j = 0; j < static_cast<int>(uses.size()); ++j) {
    const Use& u = uses[j];
    // The slot's previous use: this step's, or the previous step's last.
    const int p = previous[j] >= 0 ? previous[j] : last_use[u.slot];
    std::vector<Action>& at = previous[j] >= 0 ? after[uses[p].last] : head;
    if (uses[p].store) at.push_back(MakeIo(ActionKind::kWaitStore, uses[p].unit, u.slot));
    at.push_back(MakeIo(ActionKind::kLoad, u.unit, u.slot));
    before[u.first].push_back(MakeIo(ActionKind::kWaitLoad, u.unit, u.slot));
    // After the use's last rounding. A later use that reuses the slot
    // appends its LOAD after this (it comes later in `uses`), and no use
    // after that one ends at the same action.
    if (u.store) after[u.last].push_back(MakeIo(ActionKind::kStore, u.unit, u.slot));
  }
  const bool begins = n > 0 && actions[0].kind == ActionKind::kBeginStep;
  if (begins) {
    after[0].insert(after[0].begin(), head.begin(), head.end());
  } else {
    before[0].insert(before[0].begin(), head.begin(), head.end());
  }
  std::vector<Action> out;
  out.reserve(actions.size() + 4 * uses.size());
  for (int i = 0; i < n; ++i) {
    for (Action& a : before[i]) out.push_back(std::move(a));
    out.push_back(actions[i]);
    for (Action& a : after[i]) out.push_back(std::move(a));
  }
  program->actions = std::move(out);
}

}  // namespace zeroshard
