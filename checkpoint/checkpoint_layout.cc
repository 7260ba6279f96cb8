#include "checkpoint/checkpoint_layout.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/manifest.h"
#include "core/status_macros.h"
#include "engine/pipeline_partition.h"

namespace zeroshard {

ParamSpec WholeSpecAtTp(const ParamSpec& spec, int tp) {
  ParamSpec whole = spec;
  whole.shape = spec.logical();
  whole.logical_shape.clear();
  if (spec.pads_split_dim && !spec.partition.replicated() && spec.partition.dim < static_cast<int>(whole.shape.size())) {
    const int64_t multiple = int64_t{spec.partition.blocks} * tp;
    int64_t& d = whole.shape[spec.partition.dim];
    if (multiple > 0 && d % multiple != 0) {
      d = (d / multiple + 1) * multiple;
      whole.logical_shape = spec.logical();
    }
  }
  return whole;
}

void RecordParamSpec(const ParamSpec& spec, CheckpointParam* param) {
  param->clear_global_shape();
  param->clear_logical_shape();
  param->clear_split_dim();
  param->clear_split_blocks();
  param->clear_pads_split_dim();
  if (spec.padded()) {
    for (int64_t d : spec.logical_shape) param->add_logical_shape(d);
  }
  if (spec.partition.replicated()) return;
  for (int64_t d : spec.shape) param->add_global_shape(d);
  param->set_split_dim(spec.partition.dim);
  param->set_split_blocks(spec.partition.blocks);
  if (spec.pads_split_dim) param->set_pads_split_dim(true);
}

namespace {

// Unit stages at `pp`: a unit costs the elements it reads (its own and the
// ones it borrows), as the engine's automatic partition counts them.
absl::StatusOr<std::vector<int>> StagesByCost(const CheckpointManifest& m, int pp) {
  std::map<std::string, int64_t> numel;
  for (const CheckpointUnit& u : m.units()) {
    for (const CheckpointParam& p : u.params()) numel[p.name()] = ParamSpecOf(p).logical_numel();
  }
  std::vector<double> costs;
  for (const CheckpointUnit& u : m.units()) {
    double cost = 0;
    for (const CheckpointParam& p : u.params()) cost += static_cast<double>(numel[p.name()]);
    for (const std::string& b : u.borrowed()) cost += static_cast<double>(numel[b]);
    costs.push_back(cost);
  }
  const std::vector<int> per_chunk = PartitionByCost(costs, pp);
  if (per_chunk.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pp ", pp, " does not fit the checkpoint's ", m.units_size(), " units (each stage needs one)"));
  }
  std::vector<int> stages;
  for (int s = 0; s < static_cast<int>(per_chunk.size()); ++s) stages.insert(stages.end(), per_chunk[s], s);
  return stages;
}

}  // namespace

absl::StatusOr<CheckpointManifest> ManifestAtLayout(const CheckpointManifest& source, const GridShape& target) {
  if (target.dp < 1 || target.tp < 1 || target.pp < 1) {
    return absl::InvalidArgumentError(absl::StrCat("layout dp ", target.dp, " tp ", target.tp, " pp ", target.pp,
                                                   ": every size must be >= 1"));
  }
  bool has_partitions = false;
  for (const CheckpointUnit& u : source.units()) {
    for (const CheckpointParam& p : u.params()) has_partitions |= p.split_dim() >= 0;
  }
  if (target.tp > 1 && !has_partitions) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint (format ", source.format_version(), ", tp ", source.topology().tp(),
        ") records no tensor-parallel partitions, so it cannot be split over tp ", target.tp,
        "; consolidate it and start the tp run from the .safetensors file (--init_from or ckpt import)"));
  }
  CheckpointManifest m = source;
  m.set_format_version(kManifestFormatVersion);
  m.clear_files();
  CheckpointTopology* topo = m.mutable_topology();
  const bool same_pp = topo->pp() == target.pp;
  topo->set_dp(target.dp);
  topo->set_tp(target.tp);
  topo->set_pp(target.pp);
  if (!same_pp) {
    topo->clear_schedule();
    topo->clear_virtual_stages();
  }
  for (CheckpointUnit& unit : *m.mutable_units()) {
    int64_t offset = 0;
    for (CheckpointParam& p : *unit.mutable_params()) {
      const ParamSpec whole = WholeSpecAtTp(ParamSpecOf(p), target.tp);
      ASSIGN_OR_RETURN(const std::vector<int64_t> local, LocalShape(whole, target.tp));
      p.clear_shape();
      int64_t numel = 1;
      for (int64_t d : local) {
        p.add_shape(d);
        numel *= d;
      }
      p.set_offset(offset);
      p.set_numel(numel);
      offset += numel;
      RecordParamSpec(whole, &p);
    }
    unit.set_numel(offset);
  }
  std::vector<int> stages(m.units_size(), 0);
  if (same_pp) {
    for (int u = 0; u < m.units_size(); ++u) stages[u] = m.units(u).stage();
  } else if (target.pp > 1) {
    ASSIGN_OR_RETURN(stages, StagesByCost(m, target.pp));
  }
  ASSIGN_OR_RETURN(const std::vector<FlatParamLayout> layouts, LayoutsFromManifest(m, target.dp));
  for (int u = 0; u < m.units_size(); ++u) {
    m.mutable_units(u)->set_stage(stages[u]);
    m.mutable_units(u)->set_shard_numel(layouts[u].shard_numel());
  }
  return m;
}

}  // namespace zeroshard
