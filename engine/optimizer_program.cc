#include "engine/optimizer_program.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

Action Make(ActionKind kind, int unit = -1, int bucket = -1, std::vector<IssuedCollective> issues = {}) {
  Action a;
  a.kind = kind;
  a.unit = unit;
  a.bucket = bucket;
  a.issues = std::move(issues);
  return a;
}

Action MakeIo(ActionKind kind, const OffloadChunk& chunk, int index) {
  Action a = Make(kind, chunk.unit);
  a.chunk = index;
  a.slot = chunk.slot;
  return a;
}

std::vector<OffloadChunk> CutChunks(const OptimizerPhaseInput& in) {
  std::vector<OffloadChunk> chunks;
  const int64_t n = in.stream.chunk_elements;
  for (int b = static_cast<int>(in.buckets.size()) - 1; b >= 0; --b) {
    for (int u : in.buckets[b]) {
      const int64_t numel = in.units[u].region_numel;
      for (int64_t begin = 0; begin < numel; begin += n) {
        const int slot = static_cast<int>(chunks.size()) % in.stream.slots;
        chunks.push_back({u, b, begin, std::min(n, numel - begin), slot});
      }
    }
  }
  return chunks;
}

bool IsCompute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kBackwardInput ||
         k == ActionKind::kBackwardWeight || k == ActionKind::kRecompute;
}

// Where each of the first `m` LOADs goes: the index of the action it is
// inserted before. Data parallelism: load i right after the step's i-th
// compute action (FORWARD, BACKWARD, RECOMPUTE), spread evenly over them
// when there are more loads, so that the loads run under forward and
// backward. A pipeline stage: all after its first backward action. The end
// when there is no such action.
std::vector<size_t> FirstLoadPositions(const std::vector<Action>& actions, int m, bool pipeline) {
  std::vector<size_t> compute;
  for (size_t i = 0; i < actions.size(); ++i) {
    const ActionKind k = actions[i].kind;
    if (pipeline && (k == ActionKind::kBackward || k == ActionKind::kBackwardInput)) {
      return std::vector<size_t>(m, i + 1);
    }
    if (!pipeline && IsCompute(k)) compute.push_back(i);
  }
  std::vector<size_t> at(m, actions.size());
  const int n = static_cast<int>(compute.size());
  if (n == 0) return at;
  for (int i = 0; i < m; ++i) {
    at[i] = compute[m <= n ? i : static_cast<int64_t>(i) * n / m] + 1;
  }
  return at;
}

}  // namespace

int64_t MinStreamBufferBytes(int64_t bytes_per_element) { return kStreamGranuleElements * bytes_per_element; }

int64_t StreamChunkElements(int64_t buffer_bytes, int64_t bytes_per_element) {
  if (bytes_per_element <= 0 || buffer_bytes <= 0) return 0;
  return buffer_bytes / MinStreamBufferBytes(bytes_per_element) * kStreamGranuleElements;
}

int64_t ReduceNormBytes(int metrics) { return (5 + 2 * static_cast<int64_t>(metrics)) * 4; }

void AddStepPrologueAndOptimizerPhase(const OptimizerPhaseInput& in, StepProgram* program) {
  std::vector<Action>& actions = program->actions;
  actions.insert(actions.begin(), Make(ActionKind::kBeginStep));
  const int L = static_cast<int>(in.units.size());
  std::vector<bool> updated(L, false);
  for (const std::vector<int>& bucket : in.buckets) {
    for (int u : bucket) updated[u] = true;
  }
  for (int u = 0; u < L; ++u) {
    const OptimizerPhaseUnit& unit = in.units[u];
    if (!updated[u] || !unit.tied || unit.shard_numel == 0) continue;
    actions.push_back(Make(ActionKind::kTiedReduce, u, -1,
                           {{"embed", CommOp::kAllReduce, unit.shard_numel * 4, absl::StrCat("tied grads ", unit.name)}}));
  }
  const int buckets = static_cast<int>(in.buckets.size());
  for (int b = 0; b < buckets; ++b) actions.push_back(Make(ActionKind::kNormPartial, -1, b));
  actions.push_back(
      Make(ActionKind::kReduceNorm, -1, -1, {{in.norm_group, CommOp::kAllReduce, ReduceNormBytes(in.metrics),
                                              "norm, loss, overflow"}}));
  const bool streams = in.stream.slots > 0 && in.stream.chunk_elements > 0;
  program->chunks = streams ? CutChunks(in) : std::vector<OffloadChunk>();
  const std::vector<OffloadChunk>& chunks = program->chunks;
  const int C = static_cast<int>(chunks.size()), K = in.stream.slots;
  if (C > 0) {
    program->offload_slots = K;
    program->chunk_elements = in.stream.chunk_elements;
    program->streams_grads = in.stream.grads;
    // Before the phase's actions are appended (they must not count).
    const int m = std::min(C, K);
    const std::vector<size_t> at = FirstLoadPositions(actions, m, in.stream.pipeline);
    std::vector<std::vector<Action>> before(actions.size() + 1);
    // No WAIT_STORE of the slot's drained store first: the load is queued
    // behind it (OffloadStore::Load) and WAIT_LOAD waits both.
    for (int c = 0; c < m; ++c) before[at[c]].push_back(MakeIo(ActionKind::kLoad, chunks[c], c));
    std::vector<Action> placed;
    placed.reserve(actions.size() + m);
    for (size_t i = 0; i <= actions.size(); ++i) {
      placed.insert(placed.end(), before[i].begin(), before[i].end());
      if (i < actions.size()) placed.push_back(std::move(actions[i]));
    }
    actions = std::move(placed);
  }
  std::vector<std::vector<int>> chunks_of(buckets);
  for (int c = 0; c < C; ++c) chunks_of[chunks[c].bucket].push_back(c);
  // Forward order (buckets are formed from the last unit back): the next
  // step's forward needs the first units first.
  for (int b = buckets - 1; b >= 0; --b) {
    std::vector<IssuedCollective> grads, params;
    for (int u : in.buckets[b]) {
      const OptimizerPhaseUnit& unit = in.units[u];
      if (unit.shard_numel == 0) continue;
      if (in.zero.all_gathers_reduced_grads()) {
        grads.push_back({"dp", CommOp::kAllGather, unit.shard_numel * 4, absl::StrCat("grads ", unit.name)});
      }
      if (in.zero.publishes_by_all_gather()) {
        params.push_back({"dp", CommOp::kAllGather, unit.shard_numel * in.compute_dtype_bytes,
                          absl::StrCat("params ", unit.name)});
      }
    }
    if (chunks_of[b].empty()) {
      actions.push_back(Make(ActionKind::kUpdate, -1, b, std::move(grads)));
    } else {
      for (int c : chunks_of[b]) {
        const OffloadChunk& chunk = chunks[c];
        actions.push_back(MakeIo(ActionKind::kWaitLoad, chunk, c));
        Action update = Make(ActionKind::kUpdate, -1, b);
        update.chunk = c;
        update.slot = chunk.slot;
        // Stage 0 all-gathers the unit's reduced shards at its first chunk.
        for (IssuedCollective& g : grads) {
          if (chunk.begin == 0 && g.what == absl::StrCat("grads ", in.units[chunk.unit].name)) {
            update.issues.push_back(g);
          }
        }
        actions.push_back(std::move(update));
        actions.push_back(MakeIo(ActionKind::kStore, chunk, c));
        // The slot's next chunk, queued behind this store (its WAIT_LOAD
        // waits both); the last `slots` stores drain into the next step.
        if (c + K < C) actions.push_back(MakeIo(ActionKind::kLoad, chunks[c + K], c + K));
      }
    }
    actions.push_back(Make(ActionKind::kPublish, -1, b, std::move(params)));
  }
  for (int u = 0; u < L; ++u) {
    const OptimizerPhaseUnit& unit = in.units[u];
    if (!updated[u] || !unit.tied || unit.shard_numel == 0) continue;
    const int64_t sent = in.zero.shards_master() ? unit.shard_numel : unit.padded_numel;
    std::vector<IssuedCollective> issues = {
        {"embed", CommOp::kBroadcast, sent * in.compute_dtype_bytes, absl::StrCat("tied params ", unit.name)}};
    if (unit.mirror && in.zero.publishes_by_all_gather()) {
      issues.push_back({"dp", CommOp::kAllGather, unit.shard_numel * in.compute_dtype_bytes,
                        absl::StrCat("params ", unit.name)});
    }
    actions.push_back(Make(ActionKind::kTiedPublish, u, -1, std::move(issues)));
  }
  actions.push_back(Make(ActionKind::kScalerUpdate));
}

}  // namespace zeroshard
