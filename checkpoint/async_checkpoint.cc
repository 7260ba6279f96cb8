#include "checkpoint/async_checkpoint.h"

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/manifest.h"
#include "checkpoint/save_steps.h"
#include "checkpoint/shard_file.h"
#include "comm/status_agreement.h"
#include "core/file_io.h"
#include "core/status_macros.h"
#include "engine/state_view.h"

namespace zeroshard {

int64_t CheckpointSnapshot::bytes() const {
  int64_t n = 0;
  for (const PinnedHostBuffer& b : values) n += static_cast<int64_t>(b.bytes());
  return n;
}

absl::StatusOr<std::unique_ptr<CheckpointSnapshot>> TakeCheckpointSnapshot(
    Engine& engine, const std::string& root, int64_t step, const CheckpointRunConfig& run, const DataPosition& data,
    const SaveOptions& options, std::vector<PinnedHostBuffer>* recycled) {
  Communicator& dp = engine.control();
  ASSIGN_OR_RETURN(const std::string tmp_dir, CreateSaveDirectory(dp, root, step));
  auto s = std::make_unique<CheckpointSnapshot>();
  const EngineCoordinates at = engine.coordinates();
  s->root = root;
  s->tmp_dir = tmp_dir;
  s->step = step;
  s->pp_rank = at.stage;
  s->dp_rank = at.checkpoint_dp_rank;
  s->tp_rank = at.tp_rank;
  s->layouts = SavedLayouts(engine);
  s->kinds = CheckpointKinds(engine.options().optimizer);
  s->slot_of_unit.assign(static_cast<size_t>(engine.num_units()), -1);
  const EngineStateView& view = engine.state();
  const Device device = engine.options().device;
  size_t next_recycled = 0;
  const auto buffer_of = [&](size_t bytes) -> absl::StatusOr<PinnedHostBuffer> {
    if (recycled != nullptr && next_recycled < recycled->size() && (*recycled)[next_recycled].bytes() == bytes) {
      return std::move((*recycled)[next_recycled++]);
    }
    if (recycled != nullptr) recycled->clear();  // the layout changed: fresh buffers from here on
    return PinnedHostBuffer::Allocate(bytes);
  };
  const absl::Status copied = [&]() -> absl::Status {
    int slot = 0;
    for (const FlatParamLayout& l : s->layouts) {
      if (l.numel() == 0) continue;  // the shard file skips it
      const int u = l.unit_index();
      s->slot_of_unit[u] = slot++;
      const int64_t count = l.shard_numel();
      // The rank's dp-wide shard within its master region (the whole unit
      // under stage 0, a shard-group shard under hybrid sharding).
      const int64_t offset = l.ShardBegin(s->dp_rank) - RegionOf(view, u, kKindMaster).begin;
      for (const std::string& k : s->kinds) {
        ASSIGN_OR_RETURN(PinnedHostBuffer b, buffer_of(static_cast<size_t>(count) * sizeof(float)));
        const int kind = view.FindKind(k);
        if (kind < 0 || !view.region(u, kind).present) {
          std::memset(b.data(), 0, b.bytes());
        } else if (device != Device::kCpu || view.data(u, kind) == nullptr) {
          // A GPU's, or the NVMe tier's (no resident copy).
          RETURN_IF_ERROR(view.Read(u, kind, offset, count, b.data()));
        } else {
          std::memcpy(b.data(), static_cast<const float*>(view.data(u, kind)) + offset, b.bytes());
        }
        s->values.push_back(std::move(b));
      }
    }
    return absl::OkStatus();
  }();
  if (recycled != nullptr) recycled->clear();  // what the snapshot did not take
  RETURN_IF_ERROR(AgreeOnSavePhase(dp, tmp_dir, step, "copying the checkpoint snapshot", copied));
  if (dp.rank() == 0) s->manifest = ManifestWithoutFiles(engine, step, run, data, options);
  return s;
}

absl::StatusOr<CheckpointFile> WriteCheckpointSnapshot(const CheckpointSnapshot& s, const SaveOptions& options) {
  const std::string path = JoinPath(s.tmp_dir, ShardFileName(s.pp_rank, s.dp_rank, s.tp_rank));
  // Errors name the file (the shard writer's mostly do already).
  const auto named = [&](const absl::Status& e) {
    if (absl::StrContains(e.message(), path)) return e;
    return absl::Status(e.code(), absl::StrCat(path, ": ", e.message()));
  };
  if (options.async_write_fault) {
    if (absl::Status f = options.async_write_fault(s.step); !f.ok()) return named(f);
  }
  const size_t kinds = s.kinds.size();
  absl::StatusOr<CheckpointFile> file =
      WriteShardFile(s.tmp_dir, s.pp_rank, s.dp_rank, s.tp_rank, s.step, s.layouts, s.kinds,
                     [&](int u, int k) -> absl::StatusOr<const float*> {
                       const int slot = s.slot_of_unit[u];
                       if (slot < 0) return absl::InternalError(absl::StrCat("unit ", u, " is not in the snapshot"));
                       return s.values[static_cast<size_t>(slot) * kinds + k].as<const float>();
                     });
  if (!file.ok()) return named(file.status());
  return file;
}

absl::Status CommitCheckpointSnapshot(Engine& engine, const CheckpointSnapshot& s,
                                      const absl::StatusOr<CheckpointFile>& written, const SaveOptions& options) {
  Communicator& dp = engine.control();
  RETURN_IF_ERROR(AgreeOnSavePhase(dp, s.tmp_dir, s.step, "writing a shard file", written.status()));
  return CommitShardFiles(dp, s.root, s.tmp_dir, s.step, s.manifest, *written, options);
}

absl::Status AsyncCheckpointer::Begin(Engine& engine, const std::string& root, int64_t step,
                                      const CheckpointRunConfig& run, const DataPosition& data) {
  if (snapshot_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the asynchronous checkpoint of step ", snapshot_->step,
                                                      " is in flight; finish it before saving step ", step));
  }
  ASSIGN_OR_RETURN(snapshot_, TakeCheckpointSnapshot(engine, root, step, run, data, options_, &recycled_));
  peak_bytes_ = std::max(peak_bytes_, snapshot_->bytes());
  const CheckpointSnapshot* s = snapshot_.get();
  const SaveOptions* options = &options_;
  return writer_.Start([s, options] { return WriteCheckpointSnapshot(*s, *options); });
}

absl::StatusOr<int64_t> AsyncCheckpointer::Finish(Engine& engine) {
  if (snapshot_ == nullptr) return absl::FailedPreconditionError("no asynchronous checkpoint is in flight");
  const absl::StatusOr<CheckpointFile> written = writer_.Wait();
  std::unique_ptr<CheckpointSnapshot> s = std::move(snapshot_);
  const absl::Status committed = CommitCheckpointSnapshot(engine, *s, written, options_);
  recycled_ = std::move(s->values);
  RETURN_IF_ERROR(committed);
  return s->step;
}

int64_t AsyncCheckpointer::snapshot_bytes() const {
  int64_t n = snapshot_ ? snapshot_->bytes() : 0;
  for (const PinnedHostBuffer& b : recycled_) n += static_cast<int64_t>(b.bytes());
  return n;
}

}  // namespace zeroshard
