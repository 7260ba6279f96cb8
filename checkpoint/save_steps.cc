#include "checkpoint/save_steps.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/manifest.h"
#include "checkpoint/retention.h"
#include "comm/status_agreement.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "engine/pipeline_schedule.h"
#include "sharding/loss_scaler.h"

namespace zeroshard {
namespace {

// Rank 0's nonce, shared so every rank writes into the same directory.
absl::StatusOr<std::string> SharedNonce(Communicator& dp) {
  int32_t words[2] = {0, 0};
  if (dp.rank() == 0) {
    std::random_device rd;
    words[0] = static_cast<int32_t>(rd() & 0x7fffffff);
    words[1] = static_cast<int32_t>(rd() & 0x7fffffff);
  }
  RETURN_IF_ERROR(dp.Broadcast(words, 2, DType::kI32, 0)->Wait());
  return absl::StrFormat("%08x%08x", words[0], words[1]);
}

// Every rank's serialized CheckpointFile, gathered on every rank.
absl::StatusOr<std::vector<CheckpointFile>> GatherFileRecords(Communicator& dp, const CheckpointFile& mine) {
  const int n = dp.size();
  const std::string bytes = mine.SerializeAsString();
  std::vector<int32_t> lengths(static_cast<size_t>(n), 0);
  lengths[dp.rank()] = static_cast<int32_t>(bytes.size());
  RETURN_IF_ERROR(dp.AllReduce(lengths.data(), n, DType::kI32, ReduceOp::kMax)->Wait());
  const int32_t words = (*std::max_element(lengths.begin(), lengths.end()) + 3) / 4;
  std::vector<int32_t> send(static_cast<size_t>(words), 0), all(static_cast<size_t>(words) * n, 0);
  std::memcpy(send.data(), bytes.data(), bytes.size());
  if (words > 0) RETURN_IF_ERROR(dp.AllGather(send.data(), all.data(), words, DType::kI32)->Wait());
  std::vector<CheckpointFile> files(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const char* p = reinterpret_cast<const char*>(all.data() + static_cast<size_t>(r) * words);
    if (!files[r].ParseFromArray(p, lengths[r])) {
      return absl::InternalError(absl::StrCat("cannot parse dp rank ", r, "'s shard file record"));
    }
  }
  return files;
}

}  // namespace

// Under hybrid sharding the engine's layout is over the shard group with its
// alignment multiplied by the replica count, so each of its shards is
// `replicas` consecutive shards of this one.
FlatParamLayout CheckpointLayout(const Engine& engine, int u) {
  const FlatParamLayout& l = engine.layout(u);
  const EngineCoordinates at = engine.coordinates();
  if (at.replicas == 1) return l;
  std::vector<FlatParamDecl> decls;
  for (const FlatParamInfo& p : l.params()) decls.push_back({p.name, p.shape});
  // Cannot fail: the same parameters as a layout that exists.
  return FlatParamLayout::Create(l.unit_name(), l.unit_index(), std::move(decls), at.dp_size,
                                 l.alignment() / at.replicas)
      .value();
}

std::vector<FlatParamLayout> EngineLayouts(const Engine& engine) {
  std::vector<FlatParamLayout> layouts;
  for (int u = 0; u < engine.num_units(); ++u) layouts.push_back(CheckpointLayout(engine, u));
  return layouts;
}

// A mirror of another stage's unit is saved there, once.
std::vector<FlatParamLayout> SavedLayouts(const Engine& engine) {
  std::vector<FlatParamLayout> layouts;
  for (int u = 0; u < engine.num_units(); ++u) {
    if (engine.plan().units[u].computed) layouts.push_back(CheckpointLayout(engine, u));
  }
  return layouts;
}

StateRegion RegionOf(const EngineStateView& view, int u, absl::string_view kind) {
  const int k = view.FindKind(kind);
  return k < 0 ? StateRegion() : view.region(u, k);
}

absl::Status AbandonSave(Communicator& dp, const std::string& tmp_dir, int64_t step, const absl::Status& error) {
  absl::Status removed;
  if (dp.rank() == 0 && PathExists(tmp_dir)) removed = RemoveTree(tmp_dir);
  removed = AgreeAcrossRanksSharingError(dp, removed, "removing the temporary directory");
  std::string message = absl::StrCat(error.message(), "; step ", step, " was not saved");
  if (!removed.ok()) absl::StrAppend(&message, "; ", removed.message());
  absl::Status out(error.code(), message);
  error.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status AgreeOnSavePhase(Communicator& dp, const std::string& tmp_dir, int64_t step, absl::string_view what,
                              const absl::Status& local) {
  absl::Status s = AgreeAcrossRanksSharingError(dp, local, what);
  return s.ok() ? s : AbandonSave(dp, tmp_dir, step, s);
}

absl::StatusOr<std::string> CreateSaveDirectory(Communicator& dp, const std::string& root, int64_t step) {
  ASSIGN_OR_RETURN(const std::string nonce, SharedNonce(dp));
  const std::string tmp_dir = JoinPath(root, TempStepDirName(step, nonce));
  absl::Status created;
  if (step < 0) {
    created = absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " is negative"));
  } else if (dp.rank() == 0) {
    created = MakeDirectories(root);
    if (created.ok()) created = MakeDirectories(tmp_dir);
  }
  RETURN_IF_ERROR(AgreeOnSavePhase(dp, tmp_dir, step, "creating the checkpoint directory", created));
  return tmp_dir;
}

CheckpointManifest ManifestWithoutFiles(const Engine& engine, int64_t step, const CheckpointRunConfig& run,
                                        const DataPosition& data, const SaveOptions& options) {
  const EngineCoordinates at = engine.coordinates();
  const std::vector<FlatParamLayout> layouts = EngineLayouts(engine);
  CheckpointManifest m;
  m.set_format_version(kManifestFormatVersion);
  m.set_step(step);
  m.set_optimizer_steps(engine.stats().step);
  m.set_skipped_steps(engine.stats().skipped_steps);
  CheckpointTopology* topo = m.mutable_topology();
  topo->set_dp(at.dp_size);
  if (at.replicas > 1) topo->set_shard_group_size(at.shard_size);
  topo->set_tp(at.tp_size);
  topo->set_pp(engine.plan().stages);
  topo->set_zero_stage(engine.options().zero.stage());
  topo->set_alignment(layouts.empty() ? kDefaultShardAlignment : layouts[0].alignment());
  *m.mutable_config() = run;
  for (const std::string& k : CheckpointKinds(engine.options().optimizer)) m.add_kinds(k);
  std::vector<std::vector<std::string>> borrowed;
  for (const auto& unit : engine.model().units) borrowed.push_back(unit->borrowed_params());
  SetManifestUnits(layouts, borrowed, &m);
  if (engine.plan().stages > 1) {
    topo->set_schedule(PipelineScheduleName(engine.options().pipeline.schedule));
    topo->set_virtual_stages(engine.options().pipeline.virtual_stages);
  }
  for (int u = 0; u < m.units_size(); ++u) {
    m.mutable_units(u)->set_stage(engine.plan().units[u].stage);
    // The manifest's shapes are one tp rank's slices; every split
    // parameter records the whole tensor and how it is cut (at tp 1 too,
    // so the checkpoint can be split later), a padded one its logical shape.
    const std::vector<ParamSpec>& specs = engine.model().units[u]->params();
    for (int p = 0; p < m.units(u).params_size(); ++p) RecordParamSpec(specs[p], m.mutable_units(u)->mutable_params(p));
  }
  *m.mutable_loss_scaler() = options.loss_scaler;
  const LossScaler& scaler = engine.loss_scaler();
  if (!m.loss_scaler().has_scale() && scaler.options().type != LossScaleType::kNone) {
    m.mutable_loss_scaler()->set_scale(scaler.scale());
    m.mutable_loss_scaler()->set_growth_tracker(scaler.clean_streak());
    m.mutable_loss_scaler()->set_hysteresis_left(scaler.hysteresis_left());
    m.mutable_loss_scaler()->set_skipped_steps(scaler.overflows());
  }
  m.mutable_rng()->set_seed(engine.options().seed);
  m.mutable_rng()->set_data_shuffle_seed(data.shuffle_seed);
  m.mutable_data()->set_step(step);
  m.mutable_data()->set_sequences_consumed(data.sequences_consumed);
  m.set_optimizer(engine.options().optimizer.name);
  m.set_producer("zeroshard SaveCheckpoint");
  return m;
}

absl::Status CommitShardFiles(Communicator& dp, const std::string& root, const std::string& tmp_dir, int64_t step,
                              CheckpointManifest manifest, const CheckpointFile& mine, const SaveOptions& options) {
  absl::StatusOr<std::vector<CheckpointFile>> gathered = GatherFileRecords(dp, mine);
  if (!gathered.ok()) return AbandonSave(dp, tmp_dir, step, gathered.status());
  std::vector<CheckpointFile> files = std::move(gathered).value();
  // The manifest lists files in (pp, dp, tp) order, which is world-rank order
  // except under hybrid sharding (a file's dp_rank is not the grid's).
  std::stable_sort(files.begin(), files.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::make_tuple(a.pp_rank(), a.dp_rank(), a.tp_rank()) <
           std::make_tuple(b.pp_rank(), b.dp_rank(), b.tp_rank());
  });
  absl::Status committed;
  if (dp.rank() == 0) {
    committed = [&]() -> absl::Status {
      for (CheckpointFile& f : files) *manifest.add_files() = std::move(f);
      RETURN_IF_ERROR(ValidateManifest(manifest));
      const std::string text = EncodeManifest(manifest);
      RETURN_IF_ERROR(WriteFileDurably(JoinPath(tmp_dir, kManifestFileName), {text}));
      if (options.fault_hook) options.fault_hook("before_commit");
      return CommitStepDirectory(root, tmp_dir, step);
    }();
  }
  RETURN_IF_ERROR(AgreeOnSavePhase(dp, tmp_dir, step, "committing the checkpoint", committed));
  // Committed: a failure here no longer abandons the step.
  return AgreeAcrossRanksSharingError(
      dp, dp.rank() == 0 ? PruneCheckpointsKeepingVerified(root, options.keep_last, "", step) : absl::OkStatus(),
      "removing old checkpoints");
}

}  // namespace zeroshard
