#include "checkpoint/import_weights.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/manifest.h"
#include "checkpoint/offline_writer.h"
#include "checkpoint/safetensors_file.h"
#include "core/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::string> ImportCheckpoint(const std::string& safetensors_path, const Model& model_ref,
                                             const TrainConfig& config, const std::string& out_root) {
  const Model* model = &model_ref;
  const int dp = config.engine().parallel().dp();
  if (config.engine().parallel().tp() > 1 || config.engine().parallel().pp() > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "import writes data-parallel checkpoints (engine.parallel.tp and pp 1); the config has tp ",
        config.engine().parallel().tp(), " and pp ", config.engine().parallel().pp(),
        ": train_gpt2 --init_from FILE.safetensors splits the file at any layout"));
  }
  std::vector<FlatParamLayout> layouts;
  std::vector<std::vector<std::string>> borrowed;
  for (int u = 0; u < static_cast<int>(model->units.size()); ++u) {
    std::vector<FlatParamDecl> decls;
    for (const ParamSpec& p : model->units[u]->params()) decls.push_back({p.name, p.shape});
    ASSIGN_OR_RETURN(FlatParamLayout l, FlatParamLayout::Create(model->units[u]->name(), u, std::move(decls), dp));
    layouts.push_back(std::move(l));
    borrowed.push_back(model->units[u]->borrowed_params());
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
        model->IgnoresImportTensor(t.name)) {
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("'", safetensors_path, "' tensor '", t.name, "' is not a parameter of the config's model"));
  }

  CheckpointManifest m;
  m.set_format_version(kManifestFormatVersion);
  m.set_step(0);
  m.set_optimizer_steps(0);
  CheckpointTopology* topo = m.mutable_topology();
  topo->set_dp(dp);
  topo->set_tp(1);
  topo->set_pp(1);
  topo->set_zero_stage(config.engine().zero().stage());
  topo->set_alignment(kDefaultShardAlignment);
  *m.mutable_config() = config;
  const OptimizerConfig& opt = config.engine().optimizer();
  m.add_kinds(kKindMaster);
  if (opt.type() == OptimizerConfig::ADAMW) {
    m.add_kinds(kKindExpAvg);
    m.add_kinds(kKindExpAvgSq);
  } else if (opt.momentum() > 0) {
    m.add_kinds(kKindMomentum);
  }
  m.set_optimizer(opt.type() == OptimizerConfig::ADAMW ? "adamw" : "sgd");
  m.set_producer("zeroshard ckpt import");
  m.mutable_rng()->set_seed(config.engine().seed());
  SetManifestUnits(layouts, borrowed, &m);
  return WriteCheckpointOffline(out_root, std::move(m),
                                [&](int u, int k, int64_t begin, int64_t count, float* out) -> absl::Status {
                                  if (k != 0) {
                                    std::fill(out, out + count, 0.0f);
                                    return absl::OkStatus();
                                  }
                                  for (const FlatParamInfo& p : layouts[u].params()) {
                                    const int64_t lo = std::max(begin, p.offset);
                                    const int64_t hi = std::min(begin + count, p.offset + p.numel);
                                    if (lo >= hi) continue;
                                    RETURN_IF_ERROR(file.ReadAsF32(p.name, lo - p.offset, hi - lo, out + (lo - begin)));
                                  }
                                  return absl::OkStatus();
                                });
}

}  // namespace zeroshard
