#include "checkpoint/import_weights.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline_writer.h"
#include "checkpoint/safetensors_file.h"
#include "core/status_macros.h"
#include "engine/optimizer_config.h"
#include "sharding/optimizer_registry.h"

namespace zeroshard {

absl::StatusOr<std::string> ImportCheckpoint(const std::string& safetensors_path, const Model& model,
                                             const CheckpointRunConfig& run, const std::string& out_root) {
  const EngineConfig& engine = run.engine();
  const ParallelConfig& par = engine.parallel();
  // The model's parameters as whole, unpadded tensors (dp 1), which
  // ManifestAtLayout then cuts for the config's layout.
  std::vector<FlatParamLayout> layouts;
  std::vector<std::vector<std::string>> borrowed;
  std::vector<std::vector<ParamSpec>> wholes;
  for (int u = 0; u < static_cast<int>(model.units.size()); ++u) {
    std::vector<FlatParamDecl> decls;
    wholes.emplace_back();
    for (const ParamSpec& p : model.units[u]->params()) {
      ParamSpec whole = p;
      whole.shape = p.logical();
      whole.logical_shape.clear();
      decls.push_back({p.name, whole.shape});
      wholes.back().push_back(std::move(whole));
    }
    ASSIGN_OR_RETURN(FlatParamLayout l, FlatParamLayout::Create(model.units[u]->name(), u, std::move(decls), 1));
    layouts.push_back(std::move(l));
    borrowed.push_back(model.units[u]->borrowed_params());
  }
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(safetensors_path));
  std::vector<std::string> names;
  for (const FlatParamLayout& l : layouts) {
    for (const FlatParamInfo& p : l.params()) {
      const SafetensorsTensorInfo* t = file.header().Find(p.name);
      if (t == nullptr) {
        return absl::NotFoundError(absl::StrCat("'", safetensors_path, "' has no tensor '", p.name,
                                                "' (the config's model needs it)"));
      }
      if (t->shape != p.shape) {
        return absl::FailedPreconditionError(absl::StrCat("'", safetensors_path, "' tensor '", p.name,
                                                          "' has shape [", absl::StrJoin(t->shape, ", "),
                                                          "], the config's model expects [",
                                                          absl::StrJoin(p.shape, ", "), "]"));
      }
      names.push_back(p.name);
    }
  }
  for (const SafetensorsTensorInfo& t : file.header().tensors) {
    if (std::find(names.begin(), names.end(), t.name) != names.end() || absl::StartsWith(t.name, "optimizer.") ||
        model.IgnoresImportTensor(t.name)) {
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("'", safetensors_path, "' tensor '", t.name, "' is not a parameter of the config's model"));
  }

  CheckpointManifest whole;
  whole.set_format_version(kManifestFormatVersion);
  whole.set_step(0);
  whole.set_optimizer_steps(0);
  CheckpointTopology* topo = whole.mutable_topology();
  topo->set_dp(1);
  topo->set_tp(1);
  topo->set_pp(1);
  topo->set_zero_stage(engine.zero().stage());
  topo->set_alignment(kDefaultShardAlignment);
  *whole.mutable_config() = run;
  // The state kinds the config's optimizer keeps, as a run of it saves them.
  ASSIGN_OR_RETURN(const OptimizerOptions opt, OptimizerOptionsFromConfig(run.engine().optimizer()));
  ASSIGN_OR_RETURN(const Optimizer* plugin, FindOptimizer(opt.name));
  whole.add_kinds(kKindMaster);
  for (const OptimizerStateKind& k : plugin->StateKinds(opt)) whole.add_kinds(k.checkpoint_name);
  whole.set_optimizer(opt.name);
  whole.set_producer("zeroshard ckpt import");
  whole.mutable_rng()->set_seed(engine.seed());
  SetManifestUnits(layouts, borrowed, &whole);
  for (int u = 0; u < whole.units_size(); ++u) {
    for (int p = 0; p < whole.units(u).params_size(); ++p) {
      RecordParamSpec(wholes[u][p], whole.mutable_units(u)->mutable_params(p));
    }
  }
  ASSIGN_OR_RETURN(CheckpointManifest m, ManifestAtLayout(whole, GridShape{par.dp(), par.tp(), par.pp()}));
  return WriteCheckpointOffline(out_root, std::move(m), [&](int u, int p, int k) -> absl::StatusOr<std::vector<float>> {
    if (k != 0) return std::vector<float>();  // optimizer state starts at zero
    const ParamSpec& spec = wholes[u][p];
    std::vector<float> values(static_cast<size_t>(spec.numel()));
    RETURN_IF_ERROR(file.ReadAsF32(spec.name, 0, spec.numel(), values.data()));
    return values;
  });
}

}  // namespace zeroshard
