#include "checkpoint/engine_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_root.h"
#include "checkpoint/manifest.h"
#include "checkpoint/retention.h"
#include "comm/status_agreement.h"
#include "checkpoint/safetensors_file.h"
#include "checkpoint/save_steps.h"
#include "checkpoint/shard_file.h"
#include "core/device.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "engine/state_view.h"
#include "engine/pipeline_schedule.h"
#include "sharding/loss_scaler.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {
namespace {

// The checkpoint holds this model: the same units with the same
// parameters, each of the shape users see (the logical shape: equal slices
// do not make equal tensors — a vocabulary of 67 and one of 68 both pad to
// 68 rows at tp 2). The layout (dp, tp, pp, padding) may differ.
absl::Status CheckModelMatches(const Engine& engine, const CheckpointManifest& m, const std::string& dir) {
  if (m.units_size() != engine.num_units()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint '", dir, "' has ", m.units_size(),
                                                      " units, the model has ", engine.num_units()));
  }
  for (int u = 0; u < engine.num_units(); ++u) {
    const CheckpointUnit& cu = m.units(u);
    const std::vector<ParamSpec>& specs = engine.model().units[u]->params();
    const std::string& name = engine.layout(u).unit_name();
    if (cu.name() != name || cu.params_size() != static_cast<int>(specs.size())) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint '", dir, "' unit ", u, " is '", cu.name(),
                                                        "' with ", cu.params_size(), " parameters, the model's is '",
                                                        name, "' with ", specs.size()));
    }
    for (int p = 0; p < cu.params_size(); ++p) {
      const ParamSpec saved = ParamSpecOf(cu.params(p));
      if (saved.name != specs[p].name || saved.logical() != specs[p].logical()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint '", dir, "' unit ", u, " parameter ", p, " is '", saved.name, "' [",
            absl::StrJoin(saved.logical(), ", "), "], the model's is '", specs[p].name, "' [",
            absl::StrJoin(specs[p].logical(), ", "), "]"));
      }
    }
  }
  return absl::OkStatus();
}

// Whether unit u's flat buffers in the checkpoint are laid out as this
// rank's (same tp, same slices of the same whole tensors), so its shard
// reads straight from the files; otherwise it is rebuilt from whole tensors.
bool SameUnitLayout(const Engine& engine, const CheckpointReader& reader, int u) {
  const int tp_size = engine.coordinates().tp_size;
  if (reader.tp() != tp_size) return false;
  const CheckpointUnit& cu = reader.manifest().units(u);
  const std::vector<ParamSpec>& specs = engine.model().units[u]->params();
  const std::vector<FlatParamInfo>& infos = engine.layout(u).params();
  for (int p = 0; p < cu.params_size(); ++p) {
    const ParamSpec saved = ParamSpecOf(cu.params(p));
    const std::vector<int64_t> slice(cu.params(p).shape().begin(), cu.params(p).shape().end());
    if (slice != infos[p].shape || saved.shape != specs[p].shape) return false;
    if (tp_size > 1 && !(saved.partition == specs[p].partition)) return false;
  }
  return true;
}

// Elements [begin, begin + count) of this rank's flat buffer of unit u,
// kind `kind`, from the checkpoint's whole tensors: each parameter's
// logical value, padded as this model pads it, cut to this tp rank's slice.
absl::Status ReadResharded(const Engine& engine, const CheckpointReader& reader, int u, const std::string& kind,
                           int64_t begin, int64_t count, float* out) {
  std::fill(out, out + count, 0.0f);
  const std::vector<ParamSpec>& specs = engine.model().units[u]->params();
  const std::vector<FlatParamInfo>& infos = engine.layout(u).params();
  const EngineCoordinates at = engine.coordinates();
  for (size_t p = 0; p < infos.size(); ++p) {
    const int64_t lo = std::max(begin, infos[p].offset), hi = std::min(begin + count, infos[p].offset + infos[p].numel);
    if (lo >= hi) continue;
    ASSIGN_OR_RETURN(std::vector<float> whole, reader.ReadParam(u, static_cast<int>(p), kind));
    if (specs[p].padded()) whole = AddPadding(specs[p], whole.data());
    for (const GlobalRun& run : LocalToGlobalRuns(specs[p], at.tp_rank, at.tp_size)) {
      const int64_t a = std::max(lo - infos[p].offset, run.local_begin);
      const int64_t b = std::min(hi - infos[p].offset, run.local_begin + run.length);
      if (a >= b) continue;
      std::copy(whole.begin() + run.global_begin + (a - run.local_begin),
                whole.begin() + run.global_begin + (b - run.local_begin), out + (infos[p].offset + a - begin));
    }
  }
  return absl::OkStatus();
}

// Resuming must continue the saved optimizer: another type or other state
// kinds would drop the saved state (or start from none) without notice.
absl::Status CheckOptimizerMatches(const CheckpointManifest& m, const OptimizerOptions& options,
                                   const std::string& dir) {
  const std::string mine = options.name;
  const std::vector<std::string> want = CheckpointKinds(options);
  const std::vector<std::string> saved(m.kinds().begin(), m.kinds().end());
  if ((m.optimizer().empty() || m.optimizer() == mine) &&
      std::is_permutation(saved.begin(), saved.end(), want.begin(), want.end())) {
    return absl::OkStatus();
  }
  // The state kinds after "master", listed.
  const auto state = [](const std::vector<std::string>& kinds) {
    return absl::StrJoin(std::vector<std::string>(kinds.begin() + std::min<size_t>(1, kinds.size()), kinds.end()),
                         ", ");
  };
  absl::StatusOr<const Optimizer*> plugin = FindOptimizer(mine);
  std::string run = plugin.ok() ? (*plugin)->Describe(options) : mine;
  absl::StrAppend(&run, " (", want.size() > 1 ? state(want) : "no state", ")");
  // The saved optimizer as its plug-in describes it with no state.
  std::string saved_stateless = m.optimizer();
  if (absl::StatusOr<const Optimizer*> p = FindOptimizer(m.optimizer()); p.ok()) {
    saved_stateless = (*p)->Describe((*p)->Defaults());
  }
  std::string held;
  if (saved.size() > 1) {
    held = absl::StrCat(m.optimizer().empty() ? "" : m.optimizer() + " ", "optimizer state (", state(saved), ")");
  } else {
    held = absl::StrCat("no optimizer state", m.optimizer().empty() ? "" : " (" + saved_stateless + ")");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint '", dir, "' holds ", held, "; this run's optimizer is ", run,
      ": resume with the same optimizer, or load weights only with --init_from / LoadOptions weights_only"));
}

// Runs `body` and agrees on its status across ranks.
template <typename F>
absl::Status Agreed(Communicator& dp, absl::string_view what, F body) {
  return AgreeAcrossRanks(dp, body(), what);
}

}  // namespace

std::vector<std::string> CheckpointKinds(const OptimizerOptions& options) {
  std::vector<std::string> kinds = {kKindMaster};
  absl::StatusOr<const Optimizer*> plugin = FindOptimizer(options.name);
  if (!plugin.ok()) return kinds;  // the engine was created, so it is registered
  for (const OptimizerStateKind& k : (*plugin)->StateKinds(options)) kinds.push_back(k.checkpoint_name);
  return kinds;
}

bool CheckpointDue(const EngineConfig& engine, int64_t total_steps, int64_t step) {
  const CheckpointConfig& c = engine.checkpoint();
  if (c.dir().empty() || step < 1) return false;
  return (c.interval() > 0 && step % c.interval() == 0) || step == total_steps;
}

SaveOptions SaveOptionsFromConfig(const EngineConfig& engine) {
  SaveOptions options;
  options.keep_last = engine.checkpoint().keep_last();
  return options;
}

absl::Status SaveCheckpoint(Engine& public_engine, const std::string& root, int64_t step,
                            const CheckpointRunConfig& run, const DataPosition& data, const SaveOptions& options) {
  Engine& engine = public_engine;
  const EngineStateView& view = engine.state();
  const EngineCoordinates at = engine.coordinates();
  const Device device = engine.options().device;
  Communicator& dp = engine.control();
  const auto hook = [&](absl::string_view phase) {
    if (options.fault_hook) options.fault_hook(phase);
  };
  // Every rank gets the failing rank's error, and a failed phase leaves no
  // temporary directory behind.
  ASSIGN_OR_RETURN(const std::string tmp_dir, CreateSaveDirectory(dp, root, step));

  const std::vector<FlatParamLayout> layouts = EngineLayouts(engine);
  const std::vector<FlatParamLayout> saved = SavedLayouts(engine);
  const std::vector<std::string> kinds = CheckpointKinds(engine.options().optimizer);
  // Under hybrid sharding this rank writes shard dp_rank of the dp-wide
  // layout: the part of its shard-group shard its replica rank picks.
  const int dp_rank = at.checkpoint_dp_rank, pp_rank = at.stage;
  CheckpointFile mine;
  const absl::Status wrote = [&]() -> absl::Status {
    hook("before_shard_file");
    std::vector<float> zeros;  // a frozen unit's optimizer state
    // Named by this rank's (pp, dp, tp) coordinates; its index in the
    // manifest is its world (control) rank.
    // On a GPU, or on the NVMe tier, each region is copied to the host before
    // it is written: one (unit, kind) at a time, never a whole state class.
    PinnedHostBuffer host_copy;
    ASSIGN_OR_RETURN(mine, WriteShardFile(tmp_dir, pp_rank, dp_rank, at.tp_rank, step, saved, kinds,
                                          [&](int u, int k) -> absl::StatusOr<const float*> {
                                            const StateRegion master = RegionOf(view, u, kKindMaster);
                                            const int kind = view.FindKind(kinds[k]);
                                            const size_t numel = static_cast<size_t>(master.length);
                                            const float* base = nullptr;
                                            if (kind < 0 || !view.region(u, kind).present) {
                                              zeros.assign(numel, 0.0f);
                                              base = zeros.data();
                                            } else if (device != Device::kCpu || view.data(u, kind) == nullptr) {
                                              // A GPU's, or the NVMe tier's (no resident copy).
                                              if (host_copy.bytes() < numel * sizeof(float)) {
                                                host_copy = PinnedHostBuffer();  // the old block goes first
                                                ASSIGN_OR_RETURN(host_copy,
                                                                 PinnedHostBuffer::Allocate(numel * sizeof(float)));
                                              }
                                              RETURN_IF_ERROR(view.Read(u, kind, 0, master.length, host_copy.data()));
                                              base = host_copy.as<float>();
                                            } else {
                                              base = static_cast<const float*>(view.data(u, kind));
                                            }
                                            return base + (layouts[u].ShardBegin(dp_rank) - master.begin);
                                          }));
    hook("after_shard_file");
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(AgreeOnSavePhase(dp, tmp_dir, step, "writing a shard file", wrote));
  return CommitShardFiles(dp, root, tmp_dir, step,
                          dp.rank() == 0 ? ManifestWithoutFiles(engine, step, run, data, options)
                                         : CheckpointManifest(),
                          mine, options);
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(Engine& public_engine, const std::string& dir_or_root,
                                                const LoadOptions& options) {
  Engine& engine = public_engine;
  EngineStateView& view = engine.state();
  const int tp_rank = engine.coordinates().tp_rank;
  const Device device = engine.options().device;
  Communicator& dp = engine.control();
  // A root: rank 0 picks the newest step that verifies and every rank reads
  // that one (FindResumeCheckpoint, checkpoint/retention.h).
  std::string dir = dir_or_root;
  std::string fallback_warning;
  if (!PathExists(JoinPath(dir_or_root, kManifestFileName))) {
    int32_t step_words[2] = {0, 0};
    absl::Status found;
    if (dp.rank() == 0) {
      absl::StatusOr<ResumePoint> point = FindResumeCheckpoint(dir_or_root);
      found = point.status();
      if (point.ok()) {
        step_words[0] = static_cast<int32_t>(point->step & 0x7fffffff);
        step_words[1] = static_cast<int32_t>(point->step >> 31);
        fallback_warning = point->FallbackWarning();
      }
    }
    RETURN_IF_ERROR(AgreeAcrossRanksSharingError(dp, found, "choosing the checkpoint to resume from"));
    RETURN_IF_ERROR(dp.Broadcast(step_words, 2, DType::kI32, 0)->Wait());
    const int64_t step = (int64_t{step_words[1]} << 31) | step_words[0];
    dir = JoinPath(dir_or_root, StepDirName(step));
  }
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir);
  const std::vector<std::string> kinds =
      options.weights_only ? std::vector<std::string>{kKindMaster} : CheckpointKinds(engine.options().optimizer);
  RETURN_IF_ERROR(Agreed(dp, "opening the checkpoint", [&]() -> absl::Status {
    RETURN_IF_ERROR(reader.status());
    if (!options.weights_only) {
      RETURN_IF_ERROR(CheckOptimizerMatches(reader->manifest(), engine.options().optimizer, reader->dir()));
    }
    RETURN_IF_ERROR(CheckModelMatches(engine, reader->manifest(), reader->dir()));
    for (const std::string& k : kinds) {
      if (!reader->HasKind(k)) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint '", reader->dir(), "' has no '", k, "' state (it holds ",
                         absl::StrJoin(reader->manifest().kinds(), ", "), "; saved by the ",
                         reader->manifest().optimizer(), " optimizer); load it with weights_only (--init_from)"));
      }
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(Agreed(dp, "reading the checkpoint", [&]() -> absl::Status {
    for (int u = 0; u < engine.num_units(); ++u) {
      if (!engine.plan().units[u].held) continue;  // another pipeline stage's
      const StateRegion master = RegionOf(view, u, kKindMaster);
      const int64_t begin = master.begin, count = master.length;
      // [begin, begin + count) may run past the unit's numel (padding at
      // this dp); only [0, numel) is stored.
      const int64_t stored = std::max<int64_t>(0, std::min(begin + count, engine.layout(u).numel()) - begin);
      const bool same = SameUnitLayout(engine, *reader, u);
      for (const std::string& k : kinds) {
        const int kind = view.FindKind(k);
        if (count == 0 || kind < 0 || !view.region(u, kind).present) continue;
        // Read on the host; on a GPU copied to the device after.
        PinnedHostBuffer staging;
        if (device != Device::kCpu || view.data(u, kind) == nullptr) {  // a GPU's, or on the NVMe tier
          ASSIGN_OR_RETURN(staging, PinnedHostBuffer::Allocate(count * sizeof(float)));
        }
        float* dst = staging.empty() ? static_cast<float*>(view.data(u, kind)) : staging.as<float>();
        if (stored > 0 && same) RETURN_IF_ERROR(reader->ReadFlat(u, k, begin, stored, dst, tp_rank));
        if (stored > 0 && !same) RETURN_IF_ERROR(ReadResharded(engine, *reader, u, k, begin, stored, dst));
        std::fill(dst + stored, dst + count, 0.0f);
        if (!staging.empty()) RETURN_IF_ERROR(view.Write(u, kind, 0, count, staging.data()));
      }
    }
    return absl::OkStatus();
  }));
  const CheckpointManifest& m = reader->manifest();
  if (!options.weights_only) {
    engine.RestoreProgress(m.optimizer_steps(), m.skipped_steps());
    // A scaler state saved by an f16 run continues; an engine without a
    // scaler, or a checkpoint without one, keeps the engine's initial state.
    if (m.loss_scaler().has_scale()) {
      engine.RestoreLossScaler(m.loss_scaler().scale(), m.loss_scaler().growth_tracker(),
                               m.loss_scaler().hysteresis_left(), m.loss_scaler().skipped_steps());
    }
  }
  RETURN_IF_ERROR(AgreeAcrossRanks(dp, view.Commit(), "publishing the loaded parameters"));
  LoadedCheckpoint loaded;
  loaded.dir = reader->dir();
  loaded.fallback_warning = fallback_warning;
  loaded.step = m.step();
  loaded.optimizer_steps = m.optimizer_steps();
  loaded.saved_dp = m.topology().dp();
  loaded.saved_pp = m.topology().pp();
  loaded.saved_tp = m.topology().tp();
  loaded.config = m.config();
  loaded.data.sequences_consumed = m.data().sequences_consumed();
  loaded.data.shuffle_seed = m.rng().data_shuffle_seed();
  loaded.loss_scaler = m.loss_scaler();
  loaded.seed = m.rng().seed();
  return loaded;
}

absl::Status ImportSafetensors(Engine& public_engine, const std::string& path) {
  Engine& engine = public_engine;
  EngineStateView& view = engine.state();
  const EngineCoordinates at = engine.coordinates();
  const Device device = engine.options().device;
  const int kMaster = EngineStateView::kMaster;
  Communicator& dp = engine.control();
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  RETURN_IF_ERROR(Agreed(dp, "opening the safetensors file", [&]() -> absl::Status {
    RETURN_IF_ERROR(file.status());
    std::vector<std::string> names;
    for (int u = 0; u < engine.num_units(); ++u) {
      for (const ParamSpec& p : engine.model().units[u]->params()) {
        const SafetensorsTensorInfo* t = file->header().Find(p.name);
        if (t == nullptr) return absl::NotFoundError(absl::StrCat("'", path, "' has no tensor '", p.name, "'"));
        if (t->shape != p.logical()) {
          return absl::FailedPreconditionError(absl::StrCat("'", path, "' tensor '", p.name, "' has shape [",
                                                            absl::StrJoin(t->shape, ", "), "], the model expects [",
                                                            absl::StrJoin(p.logical(), ", "), "]"));
        }
        names.push_back(p.name);
      }
    }
    for (const SafetensorsTensorInfo& t : file->header().tensors) {
      if (std::find(names.begin(), names.end(), t.name) != names.end() || absl::StartsWith(t.name, "optimizer.") ||
          engine.model().IgnoresImportTensor(t.name)) {
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat("'", path, "' tensor '", t.name, "' is not a model parameter"));
    }
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(Agreed(dp, "reading the safetensors file", [&]() -> absl::Status {
    for (int u = 0; u < engine.num_units(); ++u) {
      if (!engine.plan().units[u].held) continue;  // another pipeline stage's
      const StateRegion region = view.region(u, kMaster);
      const FlatParamLayout& l = engine.layout(u);
      const int64_t begin = region.begin, end = begin + region.length;
      const std::vector<ParamSpec>& specs = engine.model().units[u]->params();
      // On a GPU the master is edited in a host copy and copied back.
      PinnedHostBuffer staging;
      if ((device != Device::kCpu || view.data(u, kMaster) == nullptr) && region.length > 0) {
        ASSIGN_OR_RETURN(staging, PinnedHostBuffer::Allocate(region.length * sizeof(float)));
        RETURN_IF_ERROR(view.Read(u, kMaster, 0, region.length, staging.data()));
      }
      float* master = staging.empty() ? static_cast<float*>(view.data(u, kMaster)) : staging.as<float>();
      for (size_t i = 0; i < l.params().size(); ++i) {
        const FlatParamInfo& p = l.params()[i];
        const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
        if (lo >= hi) continue;
        const ParamSpec& spec = specs[i];
        // Elements [offset, offset + count) of the whole tensor (padded: of
        // the file's logical tensor with zero padding added).
        std::vector<float> padded;
        if (spec.padded()) {
          std::vector<float> logical(static_cast<size_t>(spec.logical_numel()));
          RETURN_IF_ERROR(file->ReadAsF32(p.name, 0, spec.logical_numel(), logical.data()));
          padded = AddPadding(spec, logical.data());
        }
        const auto read_whole = [&](int64_t offset, int64_t count, float* dst) -> absl::Status {
          if (!spec.padded()) return file->ReadAsF32(p.name, offset, count, dst);
          std::copy(padded.begin() + offset, padded.begin() + offset + count, dst);
          return absl::OkStatus();
        };
        // This rank's runs of the whole tensor (one when not split over tp),
        // clipped to the part of the slice this dp rank's shard holds.
        for (const GlobalRun& run : LocalToGlobalRuns(spec, at.tp_rank, at.tp_size)) {
          const int64_t a = std::max(lo - p.offset, run.local_begin);
          const int64_t b = std::min(hi - p.offset, run.local_begin + run.length);
          if (a >= b) continue;
          RETURN_IF_ERROR(read_whole(run.global_begin + (a - run.local_begin), b - a,
                                     master + (p.offset + a - begin)));
        }
      }
      if (!staging.empty()) RETURN_IF_ERROR(view.Write(u, kMaster, 0, region.length, staging.data()));
    }
    return absl::OkStatus();
  }));
  return AgreeAcrossRanks(dp, view.Commit(), "publishing the imported parameters");
}

}  // namespace zeroshard
